"""The report gauges, read from Postgres at scrape time so any API replica tells the truth."""

from __future__ import annotations

import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from tests.support import Api


def samples(text: str) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


async def test_open_reports_and_the_age_of_the_oldest(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    admin = await api.member("mod", admin=True)
    first = await api.post(theo, "one")
    second = await api.post(theo, "two")
    report = "mutation($p: ID!) { report(input: {postId: $p, reason: SPAM}) { id } }"
    filed = (await api.gql(report, {"p": first}, token=maya))["report"]["id"]
    await api.gql(report, {"p": second}, token=maya)
    await pool.execute("UPDATE reports SET created_at = now() - interval '2 hours' WHERE id = $1::uuid", filed)
    scraped = samples((await api.client.get("/metrics")).text)
    assert scraped["feedfabric_reports_open"] == 2
    assert 7200 <= scraped["feedfabric_report_oldest_open_seconds"] < 7300
    await api.gql("mutation($id: ID!) { resolveReport(id: $id, action: DISMISS) { id } }", {"id": filed}, token=admin)
    scraped = samples((await api.client.get("/metrics")).text)
    assert scraped["feedfabric_reports_open"] == 1
    assert scraped["feedfabric_report_oldest_open_seconds"] < 600
