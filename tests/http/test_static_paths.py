"""Paths under /static that leave the folder are 404, whatever their spelling: never a false outage."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from feedfabric.core.settings import Settings
from feedfabric.http.deadline import RequestDeadline
from feedfabric.http.static import StaticFolder
from starlette.applications import Starlette
from starlette.routing import Mount

from tests.realtime_support import serve

ESCAPES = [
    "/static/vendor/%2e%2e/%2e%2e/settings.py",
    "/static/vendor/%2E%2E/%2E%2E/core/settings.py",
    "/static/vendor/..%2f..%2fcore%2fsettings.py",
    "/static/vendor/%2e%2e%2f%2e%2e%2fapp.py",
    "/static/vendor/./../../app.py",
    "/static/vendor/%00",
]


async def _raw_get(url: str, path: str) -> tuple[int, str]:
    """The status and body of a GET sent as written: an HTTP client would remove the dot segments."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        answer = (await asyncio.wait_for(reader.read(), 10)).decode(errors="replace")
    finally:
        writer.close()
    head, _, body = answer.partition("\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.parametrize("path", ESCAPES)
async def test_an_encoded_dot_segment_under_static_is_404_not_503(
    settings: Settings, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with serve(settings) as server:
        status, body = await _raw_get(server.url, path)
    assert status == 404, (status, body)
    assert "unreachable" not in caplog.text


async def test_a_static_lookup_the_filesystem_refuses_is_404_not_a_false_outage(tmp_path: Path) -> None:
    """A symlink loop makes the lookup raise ELOOP, an OSError: Starlette's StaticFiles lets it through,
    and behind the request deadline it was answered as Postgres out of reach (503, with Retry-After).
    The app's static folders say 404."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    app = Starlette(routes=[Mount("/static/x", StaticFolder(directory=tmp_path))])
    app.add_middleware(RequestDeadline, seconds=5)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        assert (await client.get("/static/x/loop")).status_code == 404
