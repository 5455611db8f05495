"""The playground's safety views in a real browser (headless Debian Chromium driven by Playwright):
a member reports a post from its card, and the moderator works the Reports queue, whose resolve
actions close every report on the same target through holdPost's path.

Tag feeds are read from Postgres, so no worker is needed to show the posts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from feedfabric.core.settings import Settings
from feedfabric.http.playground import ADMIN_EXTERNAL_ID
from playwright.async_api import Browser, Page, expect

from tests.browser_support import launched_chromium
from tests.realtime_support import Server, serve

expect.set_options(timeout=15_000)  # two cores shared with the server
DEV_SECRET = "safety-browser-secret"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched_chromium() as launched:
        yield launched


async def signed_in(browser: Browser, server: Server, external_id: str) -> Page:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors  # type: ignore[attr-defined]
    await page.goto(f"{server.url}/playground/?as={external_id}#dev-secret={DEV_SECRET}")
    await expect(page.locator("body")).to_have_attribute("data-viewer", external_id)
    return page


async def open_tag(page: Page, tag: str) -> None:
    await page.locator("#tag-form input").fill(tag)
    await page.locator("#tag-form button").click()
    await expect(page.locator("#view-title")).to_have_text(f"#{tag}")


async def test_a_member_reports_a_post_and_the_moderator_holds_it_from_the_queue(
    settings: Settings, pool: asyncpg.Pool, browser: Browser
) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True, "feedfabric_dev_secret": DEV_SECRET})
    async with serve(dev) as server:
        api = server.api
        await api.member("maya")
        ivy = await api.member("ivy")
        theo = await api.member("theo")
        admin = api.token(ADMIN_EXTERNAL_ID, admin=True)
        await api.gql('mutation { upsertProfile(username: "moderator", displayName: "Mod") { id } }', token=admin)
        spam = await api.post(theo, "cheap watches here #safetydemo")
        await api.post(theo, "a fine day #safetydemo")
        # Ivy reported it already: the moderator's one action must close both reports.
        await api.gql("mutation($p: ID!) { report(input: {postId: $p, reason: SPAM}) { id } }", {"p": spam}, token=ivy)

        maya = await signed_in(browser, server, "maya")
        await expect(maya.locator("#reports-tab")).to_be_hidden()  # a member has no queue
        await open_tag(maya, "safetydemo")
        card = maya.locator(f'#feed article.post[data-id="{spam}"]')
        await expect(card).to_contain_text("cheap watches")
        await card.locator('[data-action="open-report"]').click()
        form = card.locator("form.report-form")
        await expect(form).to_be_visible()
        await form.locator("select[name=reason]").select_option("HARASSMENT")
        await form.locator("input[name=note]").fill("keeps posting this")
        await form.locator("button[type=submit]").click()
        await expect(card.locator(".reported")).to_have_text("Reported. A moderator will look at it.")
        row = await pool.fetchrow(
            "SELECT r.reason, r.note FROM reports r JOIN members m ON m.id = r.reporter_id WHERE m.username = 'maya'"
        )
        assert (row["reason"], row["note"]) == ("harassment", "keeps posting this")

        mod = await signed_in(browser, server, ADMIN_EXTERNAL_ID)
        tab = mod.locator("#reports-tab")
        await expect(tab).to_be_visible()
        await tab.click()
        await expect(mod.locator("#view-title")).to_have_text("Reports")
        cards = mod.locator("#feed article.report")
        await expect(cards).to_have_count(2)  # oldest first: Ivy's, then Maya's
        await expect(cards.nth(0)).to_contain_text("by @ivy")
        await expect(cards.nth(1)).to_contain_text("by @maya")
        await expect(cards.nth(1)).to_contain_text("keeps posting this")
        await expect(cards.nth(1)).to_contain_text("2 reports")
        await expect(cards.nth(1)).to_contain_text("cheap watches")
        await cards.nth(1).locator('[data-resolve="HOLD_POST"]').click()
        await expect(cards).to_have_count(0)
        await expect(mod.locator("#feed")).to_contain_text("The queue is empty.")
        assert await pool.fetchval("SELECT status FROM posts WHERE id = $1::uuid", spam) == "held"
        assert await pool.fetchval("SELECT count(*) FROM reports WHERE status = 'actioned'") == 2

        # A post a moderation term held comes into the queue with no reporter.
        await api.gql('mutation { addModerationTerm(phrase: "scamcoin") { id } }', token=admin)
        await api.post(theo, "buy SCAMCOIN #safetydemo")
        await mod.locator("[data-view=home]").click()
        await tab.click()
        await expect(cards).to_have_count(1)
        await expect(cards.first).to_contain_text("filed by a moderation term")
        await cards.first.locator('[data-resolve="DISMISS"]').click()
        await expect(cards).to_have_count(0)

        # The held post has left Maya's tag feed on her next read.
        await maya.locator("[data-view=home]").click()
        await open_tag(maya, "safetydemo")
        await expect(maya.locator("#feed article.post")).to_have_count(1)
        await expect(maya.locator("#feed")).not_to_contain_text("cheap watches")
        assert maya.errors == [] and mod.errors == []  # type: ignore[attr-defined]


async def test_a_member_blocks_from_a_post_and_reports_with_also_block(
    settings: Settings, pool: asyncpg.Pool, browser: Browser
) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True, "feedfabric_dev_secret": DEV_SECRET})
    async with serve(dev) as server:
        api = server.api
        maya_token = await api.member("maya")
        theo = await api.member("theo")
        ivy = await api.member("ivy")
        await api.follow(maya_token, "theo")
        await api.post(theo, "first from theo #blockdemo")
        await api.post(theo, "second from theo #blockdemo")
        rude = await api.post(ivy, "rude words from ivy #blockdemo")
        await api.post(ivy, "more from ivy #blockdemo")

        maya = await signed_in(browser, server, "maya")
        await open_tag(maya, "blockdemo")
        posts = maya.locator("#feed article.post")
        await expect(posts).to_have_count(4)
        # Block from a card: every post of that author leaves the page at once, and stays out on a new read.
        await posts.filter(has_text="first from theo").locator('[data-action="block"]').click()
        await expect(maya.locator("#feed")).not_to_contain_text("from theo")
        await expect(posts).to_have_count(2)
        row = await pool.fetchrow(
            """SELECT count(*) AS n FROM blocks b JOIN members a ON a.id = b.blocker_id JOIN members t ON t.id = b.blocked_id
               WHERE a.username = 'maya' AND t.username = 'theo'"""
        )
        assert row["n"] == 1
        assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'member'") == 0  # ended

        # Report with "also block": the report is filed and the author is blocked in the same step.
        card = maya.locator(f'#feed article.post[data-id="{rude}"]')
        await card.locator('[data-action="open-report"]').click()
        await card.locator("select[name=reason]").select_option("HARASSMENT")
        await card.locator("input[name=alsoBlock]").check()
        await card.locator("form.report-form button[type=submit]").click()
        await expect(posts).to_have_count(0)
        assert await pool.fetchval("SELECT count(*) FROM reports WHERE reason = 'harassment'") == 1
        assert await pool.fetchval("SELECT count(*) FROM blocks") == 2

        await maya.locator("[data-view=home]").click()
        await open_tag(maya, "blockdemo")
        await expect(maya.locator("#feed")).to_contain_text("Nothing here yet.")
        assert maya.errors == []  # type: ignore[attr-defined]
