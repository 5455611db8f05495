"""The playground in a real browser: headless Debian Chromium driven by Playwright.

A real server with the relay and workers (fan-out, media, notifications)
running: A and B sign in on two pages; B posts with a photo, and A's page
shows it live without a reload (the banner, then the item); scrolling A's
Following feed loads a second page with no duplicate.

`make test` installs Debian's `chromium` and Playwright's Python package;
Playwright's own browser download is never used (executable_path).
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import redis.asyncio as aioredis
from feedfabric.core.settings import Settings
from feedfabric.workers import events, media, notifications
from PIL import Image
from playwright.async_api import Browser, Page, expect

from tests.browser_support import launched_chromium
from tests.pipeline_support import eventually, group_runner, relay, running
from tests.realtime_support import Server, serve

PAGE_SIZE = 20  # app.js PAGE_SIZE
expect.set_options(timeout=15_000)  # two cores shared with the server, relay and workers


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched_chromium() as launched:
        yield launched


async def signed_in_page(browser: Browser, server: Server, external_id: str) -> Page:
    """A page of its own browser context (its own session) signed in through ?as=."""
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors  # type: ignore[attr-defined]
    await page.goto(f"{server.url}/playground/?as={external_id}")
    await expect(page.locator("body")).to_have_attribute("data-viewer", external_id)
    await expect(page.locator("#live")).to_have_attribute("data-state", "open", timeout=10_000)
    return page


async def post_ids(page: Page) -> list[str]:
    return await page.locator("#feed > article.post").evaluate_all("els => els.map(e => e.dataset.id)")


def photo() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (320, 200), (40, 120, 200)).save(out, "JPEG")
    return out.getvalue()


async def _has(redis: aioredis.Redis, key: str, count: int) -> bool:
    return bool(await redis.zcard(key) >= count)


async def wait_for_subscribers(server: Server, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while server.hub.subscriber_count() < count:
        assert time.monotonic() < deadline, f"{server.hub.subscriber_count()} subscribers, wanted {count}"
        await asyncio.sleep(0.05)


async def test_a_sees_b_post_live_and_scrolls_a_second_page_without_duplicates(
    settings: Settings, pool: asyncpg.Pool, redis: aioredis.Redis, browser: Browser
) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True})
    workers = [group_runner(dev, pool, redis, spec).run for spec in (events.GROUP, media.GROUP, notifications.GROUP)]
    async with serve(dev) as server, running(relay(dev).run, *workers):
        api = server.api
        alice, bob = await api.member("alice"), await api.member("bob")
        await api.follow(alice, "bob")
        written = [await api.post(bob, f"post number {i} #browser") for i in range(PAGE_SIZE + 10)]
        # Timelines are eventually consistent: let fan-out finish before reading.
        alice_id = await pool.fetchval("SELECT id FROM members WHERE external_id = 'alice'")
        await eventually(lambda: _has(redis, f"feed:{alice_id}", len(written)))

        a = await signed_in_page(browser, server, "alice")
        feed = a.locator("#feed > article.post")
        await expect(feed).to_have_count(PAGE_SIZE)
        assert await post_ids(a) == written[::-1][:PAGE_SIZE]  # newest first
        await expect(a.locator("#source")).to_contain_text("source:")

        # Infinite scroll: the end of the list in sight loads the next page by cursor.
        await a.locator("#sentinel").scroll_into_view_if_needed()
        await expect(feed).to_have_count(len(written))
        shown = await post_ids(a)
        assert len(set(shown)) == len(shown), "a post shown twice"
        assert shown == written[::-1]
        await expect(a.locator("#end")).to_have_text("— the end —")

        # B posts with a photo from its own page; A's page, never reloaded, shows it live.
        await a.evaluate("window.__sameDocument = true")
        await wait_for_subscribers(server, 2)  # A: homeTimeline and notificationGroupUpdated
        b = await signed_in_page(browser, server, "bob")
        await b.locator("#compose textarea").fill("Live from the browser #browser")
        await b.locator("#compose input[type=file]").set_input_files(
            {"name": "harbour.jpg", "mimeType": "image/jpeg", "buffer": photo()}
        )
        await b.locator("#compose button[type=submit]").click()
        await expect(b.locator("#compose-status")).to_have_text("Posted.", timeout=30_000)
        newest_b = b.locator("#feed > article.post").first
        await expect(newest_b).to_contain_text("Live from the browser")
        await expect(newest_b.locator(".media img")).to_have_count(1)

        banner = a.locator("#new-posts")
        await expect(banner).to_be_visible(timeout=10_000)
        await expect(banner).to_have_text("1 new post — show")
        await expect(a.locator("#feed")).not_to_contain_text("Live from the browser")
        await banner.click()
        await expect(banner).to_be_hidden()
        newest_a = feed.first
        await expect(newest_a).to_contain_text("Live from the browser")
        await expect(newest_a.locator(".media img")).to_have_count(1)
        await a.wait_for_function(  # the photo is served (READY) and decodes
            "() => { const img = document.querySelector('#feed .media img');"
            " return img && img.complete && img.naturalWidth === 320; }"
        )
        assert await a.evaluate("window.__sameDocument") is True
        shown = await post_ids(a)
        assert len(shown) == len(written) + 1 and len(set(shown)) == len(shown)

        # A likes it; B hears about it through notificationGroupUpdated (unread groups: A's follow, the like).
        await newest_a.locator('[data-action="toggle-like"]').click()
        await expect(newest_a.locator('[data-action="toggle-like"]')).to_have_text("♥ 1")
        await expect(b.locator("#unread")).to_have_text("2", timeout=20_000)
        await b.locator("[data-view=notifications]").click()
        like_group = b.locator("#feed > article.notification").first
        await expect(like_group).to_contain_text("Alice liked your post")
        # Two more like it while B watches: the same group grows in place, no new line per like.
        liked_post = await newest_a.get_attribute("data-id")
        for name in ("carol", "dan"):
            await api.gql(
                "mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": liked_post}, token=await api.member(name)
            )
        await expect(like_group).to_contain_text("and 2 others liked your post", timeout=20_000)
        await expect(b.locator("#feed > article.notification")).to_have_count(2)  # the like group, the follow group
        await expect(like_group.locator(".actors .avatar")).to_have_count(3)
        await like_group.locator('[data-action="read-group"]').click()
        await expect(b.locator("#unread")).to_have_text("1")

        assert a.errors == [] and b.errors == []  # type: ignore[attr-defined]


async def test_get_started_picks_a_topic_follows_a_suggestion_and_shows_the_first_for_you_page(
    settings: Settings, pool: asyncpg.Pool, browser: Browser
) -> None:
    """A new member opens "Get started": popular topics with their week's posts, the most followed member
    suggested; picking #jazz brings its poster up as popular in their topics and its posts onto the For
    You page; following him and dismissing another take both out of the suggestions."""
    dev = settings.model_copy(update={"feedfabric_dev_mode": True})
    async with serve(dev) as server:
        api = server.api
        jazzman, chessman = await api.member("jazzman"), await api.member("chessman")
        await api.member("star")
        for fan in ("fan1", "fan2"):
            await api.follow(await api.member(fan), "star")
        jazz = [await api.post(jazzman, f"late set number {n} #jazz") for n in range(2)]
        chess = await api.post(chessman, "an opening trap #chess")
        await api.gql("mutation($p: ID!) { likePost(postId: $p) { id } }", {"p": chess}, token=api.token("fan1"))
        await api.member("newbie")

        page = await signed_in_page(browser, server, "newbie")
        await page.locator("[data-view=start]").click()
        panel = page.locator("#get-started")
        await expect(panel.locator('[data-start="pick"][data-topic="jazz"]')).to_have_text("#jazz · 2")
        suggestions = panel.locator("article.suggestion")
        await expect(suggestions.first).to_have_attribute("data-member", "star")
        await expect(suggestions.first).to_contain_text("Popular")
        foryou = panel.locator(".foryou article.post")
        await expect(foryou).to_have_count(1)  # a newcomer's first page: what is popular
        await expect(foryou.first).to_contain_text("an opening trap")

        await panel.locator('[data-start="pick"][data-topic="jazz"]').click()
        await expect(panel.locator('[data-start="unpick"][data-topic="jazz"]')).to_have_text("#jazz ✓")
        await expect(suggestions.first).to_have_attribute("data-member", "jazzman")
        await expect(suggestions.first).to_contain_text("Popular in your topics")
        await expect(foryou).to_have_count(3)
        shown = await foryou.evaluate_all("els => els.map(e => e.dataset.id)")
        assert set(jazz) <= set(shown)

        await suggestions.first.locator('[data-start="follow"]').click()
        await expect(panel.locator('article.suggestion[data-member="jazzman"]')).to_have_count(0)
        await panel.locator('article.suggestion[data-member="star"] [data-start="dismiss"]').click()
        await expect(panel.locator('article.suggestion[data-member="star"]')).to_have_count(0)
        await expect(foryou).to_have_count(3)
        newbie = await pool.fetchval("SELECT id FROM members WHERE external_id = 'newbie'")
        assert (
            await pool.fetchval(
                "SELECT count(*) FROM follows WHERE follower_id = $1 AND target_type IN ('member', 'tag')", newbie
            )
            == 2
        )
        assert page.errors == []  # type: ignore[attr-defined]
