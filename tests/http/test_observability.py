"""Structured logs with request IDs, and readiness that reports each dependency on its own."""

from __future__ import annotations

import io
import json
import logging

from feedfabric.core.logging import JsonFormatter, request_id_var
from feedfabric.core.settings import Settings
from feedfabric.ops.devstack import free_port

from tests.schema.test_limits import api_with
from tests.support import Api


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.stream = io.StringIO()
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.stream.write(self.format(record) + "\n")

    def lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]


async def test_request_id_is_echoed_or_made(api: Api) -> None:
    given = await api.client.get("/healthz", headers={"X-Request-ID": "trace-123.abc"})
    assert given.headers["x-request-id"] == "trace-123.abc"
    made = await api.client.get("/healthz")
    assert len(made.headers["x-request-id"]) == 32
    hostile = await api.client.get("/healthz", headers={"X-Request-ID": "x" * 500})
    assert hostile.headers["x-request-id"] != "x" * 500


async def test_access_log_is_json_with_the_request_id(api: Api) -> None:
    capture = _Capture()
    logger = logging.getLogger("feedfabric.access")
    logger.addHandler(capture)
    try:
        await api.raw("{ __typename }", headers={"X-Request-ID": "req-42"})
    finally:
        logger.removeHandler(capture)
    entries = [e for e in capture.lines() if e.get("path") == "/graphql"]
    assert entries, capture.stream.getvalue()
    entry = entries[-1]
    assert entry["request_id"] == "req-42" and entry["status"] == 200 and entry["method"] == "POST"
    assert entry["level"] == "INFO" and entry["logger"] == "feedfabric.access"
    assert isinstance(entry["duration_ms"], float)


def test_json_formatter_includes_exceptions_and_context() -> None:
    token = request_id_var.set("ctx-1")
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            record = logging.getLogger("x").makeRecord(
                "x",
                logging.ERROR,
                __file__,
                1,
                "failed %s",
                ("here",),
                exc_info=__import__("sys").exc_info(),
                extra={"post_id": "p1"},
            )
        line = json.loads(JsonFormatter().format(record))
    finally:
        request_id_var.reset(token)
    assert line["message"] == "failed here" and line["request_id"] == "ctx-1" and line["post_id"] == "p1"
    assert "ValueError: boom" in line["exc"]


async def test_readyz_reports_each_dependency(api: Api) -> None:
    response = await api.client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body == {"ready": True, "status": "ok", "checks": {"postgres": "ok", "redis": "ok", "broker": "ok"}}


async def test_ready_without_redis_or_broker(api: Api, settings: Settings) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with api_with(settings, redis_url=f"redis://{dead}/0", kafka_bootstrap_servers=dead) as degraded:
        response = await degraded.client.get("/readyz")
        assert response.status_code == 200
        body = response.json()
        assert body["ready"] is True and body["status"] == "degraded"
        assert body["checks"] == {"postgres": "ok", "redis": "down", "broker": "down"}


async def test_not_ready_without_postgres(api: Api, settings: Settings) -> None:
    async with api_with(settings) as app_api:
        resources = app_api.app.state.resources  # type: ignore[attr-defined]
        await resources.pool.close()
        resources.readiness = None
        response = await app_api.client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["checks"]["postgres"] == "down"
        # Cached for a second: the next probe does not touch the dependencies again.
        cached_at = resources.readiness[0]
        await app_api.client.get("/readyz")
        assert resources.readiness[0] == cached_at
