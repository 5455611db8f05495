"""GraphiQL works with no internet: its page and every script and style come from the server itself.

Headless Debian Chromium (as tests/http/test_playground_browser.py drives it) with
every request to a host other than loopback aborted: the editor renders, the
schema loads, and a query runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from feedfabric.core.settings import Settings
from feedfabric.ops import vendor
from playwright.async_api import Browser, Route, expect

from tests.browser_support import launched_chromium
from tests.realtime_support import serve

LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched_chromium() as launched:
        yield launched


def test_graphiql_assets_are_installed_from_the_lock() -> None:
    assets = vendor.locked()
    assert {a.package for a in assets} >= {"react", "react-dom", "graphiql", "@graphiql/plugin-explorer"}
    assert all(a.installed() for a in assets), "run `python -m feedfabric.ops.vendor` (make does)"


async def test_graphiql_renders_and_runs_a_query_with_the_internet_blocked(
    browser: Browser, settings: Settings
) -> None:
    async with serve(settings) as server:
        context = await browser.new_context()
        blocked: list[str] = []
        served: list[str] = []

        async def only_loopback(route: Route) -> None:
            url = route.request.url
            host = urlsplit(url).hostname or ""
            if url.startswith(("data:", "blob:")) or host in LOOPBACK:
                served.append(url)
                await route.continue_()
            else:
                blocked.append(url)
                await route.abort()

        await context.route("**/*", only_loopback)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        async with page.expect_response(lambda r: "__schema" in (r.request.post_data or "")) as schema_query:
            await page.goto(f"{server.url}/graphql?q=%7B%20__typename%20%7D")
        schema = await (await schema_query.value).json()
        assert "errors" not in schema and schema["data"]["__schema"]["queryType"]["name"] == "Query"  # docs, completion
        execute = page.locator(".graphiql-execute-button")
        await expect(execute).to_be_visible(timeout=20_000)
        await execute.click()
        await expect(page.locator(".graphiql-response")).to_contain_text('"__typename": "Query"', timeout=15_000)
        assert blocked == [], f"GraphiQL asked the internet for {blocked}"
        assert errors == []
        assert any("/static/vendor/graphiql/graphiql.min.js" in url for url in served)
        await context.close()
