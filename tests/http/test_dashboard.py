"""The admin's view of the feeds: feedStats and rankerModels, and /dashboard drawn in Chromium."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.db import feed_log as feed_log_db
from feedfabric.http import dashboard
from playwright.async_api import Browser, expect

from tests import factories
from tests.browser_support import launched_chromium
from tests.pipeline_support import eventually, relay, running
from tests.realtime_support import HOME_SUB, TRANSPORT_WS, serve, wait_subscribed, ws_client
from tests.support import Api
from tests.tracing_support import events_runner, traced_process

DOCS = Path(__file__).resolve().parents[2] / "docs"


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """docs/ keeps the pictures the docs show; a test run writes them there only when asked
    (FEEDFABRIC_SCREENSHOTS=1), so `make test` leaves the work tree as it found it."""
    return (DOCS if os.environ.get("FEEDFABRIC_SCREENSHOTS") == "1" else tmp_path) / name


STATS = """{ feedStats(days: 3) { feed preset day pagesServed postsServed postsEngaged engagementRate } }"""
MODELS = """{ rankerModels { id auc baselineAuc active trainingRows weights { signal weight } } }"""


async def _seed(pool: asyncpg.Pool) -> dict[str, uuid.UUID]:
    """Today: a reader served a Following page of 4 posts (liked 1) and a For You BALANCED page of 4
    (liked 2, commented 1); yesterday: a For You LEARNED page of 2 (reposted 1). Likes after 24 hours
    do not count. A model trained from it."""
    reader = await factories.member(pool, name="reader")
    author = await factories.member(pool, name="author")
    now = datetime.now(UTC)
    today = max(now - timedelta(minutes=30), now.replace(hour=0, minute=0, second=0, microsecond=0))  # still today
    yesterday = today - timedelta(days=1)
    await feed_log_db.ensure_partitions(pool, {today.date(), yesterday.date()})
    posts = [await factories.post(pool, author) for _ in range(10)]
    pages = [
        ("following", None, today, posts[0:4]),
        ("for_you", "balanced", today + timedelta(seconds=1), posts[4:8]),
        ("for_you", "learned", yesterday, posts[8:10]),
    ]
    for feed, preset, at, ids in pages:
        await pool.executemany(
            "INSERT INTO feed_log (member_id, feed, post_id, position, source, age_seconds, served_at, preset)"
            " VALUES ($1, $2, $3, $4, 'postgres', 60, $5, $6)",
            [(reader, feed, post_id, n, at, preset) for n, post_id in enumerate(ids)],
        )
    await pool.executemany(
        "INSERT INTO likes (post_id, member_id, created_at) VALUES ($1, $2, $3)",
        [
            (posts[0], reader, today + timedelta(minutes=5)),
            (posts[1], reader, today + timedelta(hours=25)),  # too late to count
            (posts[4], reader, today + timedelta(minutes=5)),
            (posts[5], reader, today + timedelta(minutes=6)),
        ],
    )
    await pool.execute(
        "INSERT INTO comments (id, post_id, author_id, content, created_at) VALUES ($1, $2, $3, 'nice', $4)",
        uuid.uuid4(),
        posts[5],
        reader,
        today + timedelta(minutes=7),
    )
    await pool.execute(
        "INSERT INTO posts (id, author_id, content, repost_of, created_at) VALUES ($1, $2, '', $3, $4)",
        uuid.uuid4(),
        reader,
        posts[8],
        yesterday + timedelta(hours=1),
    )
    await pool.execute(
        "INSERT INTO ranker_models (training_rows, auc, baseline_auc, signals, weights, intercept, active)"
        " VALUES (1000, 0.71, 0.64, $1, $2, -1.5, true)",
        ["affinity", "interest", "favourite", "recency", "similarity", "popularity"],
        [0.4, 0.9, 0.3, 0.2, 1.1, -0.1],
    )
    return {"reader": reader}


async def test_feed_stats_count_pages_posts_and_engagement_within_24_hours(api: Api, pool: asyncpg.Pool) -> None:
    admin = await api.member("admin", admin=True)
    await _seed(pool)
    rows = (await api.gql(STATS, token=admin))["feedStats"]
    got = {(r["feed"], r["preset"]): r for r in rows}
    assert {k: (r["pagesServed"], r["postsServed"], r["postsEngaged"]) for k, r in got.items()} == {
        ("following", None): (1, 4, 1),
        ("for_you", "BALANCED"): (1, 4, 2),
        ("for_you", "LEARNED"): (1, 2, 1),
    }
    assert got[("for_you", "BALANCED")]["engagementRate"] == pytest.approx(0.5)
    models = (await api.gql(MODELS, token=admin))["rankerModels"]
    assert [(m["auc"], m["baselineAuc"], m["active"]) for m in models] == [(0.71, 0.64, True)]
    assert {w["signal"]: w["weight"] for w in models[0]["weights"]}["similarity"] == 1.1


async def test_feed_stats_and_models_are_for_admins_only(api: Api) -> None:
    member = await api.member("member")
    assert await api.error_codes(STATS, token=member) == ["FORBIDDEN"]
    assert await api.error_codes(MODELS, token=member) == ["FORBIDDEN"]


async def test_the_dashboard_is_a_clean_403_page_for_anyone_but_an_admin(api: Api) -> None:
    member = await api.member("member")
    for token in (member, None, "not-a-token"):
        response = await api.rest("GET", "/dashboard", token=token)
        assert response.status_code == 403
        assert response.headers["content-type"].startswith("text/html")
        assert "admins" in response.text and "Traceback" not in response.text


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched_chromium() as launched:
        yield launched


async def test_an_admin_sees_the_feeds_compared_as_charts(
    settings: Settings, pool: asyncpg.Pool, browser: Browser, tmp_path: Path
) -> None:
    await _seed(pool)
    async with serve(settings) as server:
        admin = await server.api.member("admin", admin=True)
        context = await browser.new_context(
            viewport={"width": 1280, "height": 1100}, extra_http_headers={"Authorization": f"Bearer {admin}"}
        )
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(f"{server.url}/dashboard")
        await expect(page.locator("body")).to_have_attribute("data-ready", "true")
        for chart in ("rate-by-day", "served-by-feed", "by-position", "model-auc", "model-weights"):
            await expect(page.locator(f"#{chart}")).to_have_attribute("data-rendered", "true")
        drawn = await page.evaluate(
            """() => Object.fromEntries(Object.entries(window.dashboardCharts).map(([id, chart]) =>
                   [id, {labels: chart.data.labels, sets: chart.data.datasets.map(d => [d.label, d.data])}]))"""
        )
        served = drawn["served-by-feed"]
        assert served["labels"] == ["following", "for_you · balanced", "for_you · learned"]
        assert served["sets"] == [["posts served", [4, 4, 2]], ["posts engaged", [1, 2, 1]]]
        rate = dict(drawn["rate-by-day"]["sets"])
        assert rate["for_you · balanced"][-1] == pytest.approx(0.5)
        assert drawn["model-auc"]["sets"] == [["model AUC", [0.71]], ["BALANCED AUC", [0.64]]]
        assert drawn["model-weights"]["labels"][4] == "similarity"
        assert drawn["by-position"]["labels"][:4] == [1, 2, 3, 4]
        # Chart.js drew on the canvas: it is not blank.
        assert await page.evaluate(
            """() => { const c = document.getElementById('served-by-feed');
                       const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                       for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) return true; return false; }"""
        )
        await page.screenshot(path=str(screenshot_path("dashboard.png", tmp_path)), full_page=True)
        assert errors == []
        await context.close()


async def test_an_admin_sees_a_real_posts_journey_as_a_waterfall_with_its_slowest_step_highlighted(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, browser: Browser, tmp_path: Path
) -> None:
    with traced_process(settings) as traced:
        async with (
            serve(settings, traced) as server,
            running(relay(settings, tracer=traced.tracer()).run, events_runner(settings, pool, redis, traced).run),
        ):
            api = server.api
            admin = await api.member("admin", admin=True)
            alice, bob = await api.member("alice"), await api.member("bob")
            await api.follow(bob, "alice")
            async with ws_client(server, TRANSPORT_WS, bob) as ws:
                await ws.subscribe(HOME_SUB)
                await wait_subscribed(server, 1)
                post_id = await api.post(alice, "watch me travel")
                await ws.next_data()

            async def delivered() -> bool:
                journeys = dashboard.recent_journeys(server.app.state.resources)
                return any(j["postId"] == post_id and j["bars"][-1]["step"] == "delivery" for j in journeys)

            await eventually(delivered)
            context = await browser.new_context(
                viewport={"width": 1280, "height": 1100}, extra_http_headers={"Authorization": f"Bearer {admin}"}
            )
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(f"{server.url}/dashboard")
            await expect(page.locator("body")).to_have_attribute("data-ready", "true")
            await expect(page.locator("#journey-0")).to_have_attribute("data-rendered", "true")
            drawn = await page.evaluate(
                """() => { const c = window.dashboardCharts['journey-0'];
                           return {labels: c.data.labels, bars: c.data.datasets[0].data,
                                   colours: c.data.datasets[0].backgroundColor}; }"""
            )
            steps = [label.split(" (")[0].split(" →")[0].split(" to ")[0] for label in drawn["labels"]]
            assert steps[0].startswith("mutation")
            # One bar per consumer group that applied the post, after its time in the broker.
            assert steps[1:] == [
                "outbox wait",
                "relay",
                "broker",
                "worker-events",
                "fan-out batch",
                "timeline write",
                "delivery",
            ]
            assert "worker-events (PostCreated)" in drawn["labels"]
            assert "fan-out batch (1 followers, 1 inserts)" in drawn["labels"]
            durations = [end - start for start, end in drawn["bars"]]
            slowest = durations.index(max(durations))
            assert [i for i, c in enumerate(drawn["colours"]) if c == "#c0392b"] == [slowest]
            heading = await page.locator(".journey h3").first.text_content()
            assert post_id in (heading or "") and f"slowest: {drawn['labels'][slowest]}" in (heading or "")
            await page.locator("#journeys").screenshot(path=str(screenshot_path("journeys.png", tmp_path)))
            assert errors == []
            await context.close()
