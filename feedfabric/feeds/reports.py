"""Reports: a member reports a post, a comment or a member; an admin resolves every open report on
that target at once, through the moderation paths that already exist (holding a post as holdPost
does, suspending as suspendMember does), so a report's action has no rules of its own to drift.
"""

from __future__ import annotations

import uuid

import asyncpg

from feedfabric.core.errors import BadInput, NotFound, RateLimited
from feedfabric.core.ids import new_id
from feedfabric.core.models import Member
from feedfabric.core.moderation import Report, Target
from feedfabric.core.settings import Settings
from feedfabric.db import comments as comments_db
from feedfabric.db import members as members_db
from feedfabric.db import posts as posts_db
from feedfabric.db import reports as reports_db
from feedfabric.db.queryable import Queryable
from feedfabric.feeds import members as members_svc
from feedfabric.feeds import posts as posts_svc
from feedfabric.feeds import safety, text

__all__ = ["HOURLY_LIMIT", "also_block", "file", "mine", "queue", "resolve", "target_of"]

REASONS = frozenset({"spam", "harassment", "hate", "violence", "sexual_content", "self_harm", "illegal", "other"})
STATUSES = frozenset({"open", "actioned", "dismissed"})
ACTIONS = frozenset({"dismiss", "hold_post", "delete_comment", "suspend_member"})
MAX_NOTE = 1000
HOURLY_LIMIT = 20
_HOUR = 3600


def clean_note(note: str | None) -> str | None:
    """At most MAX_NOTE characters; a note with nothing visible in it is no note."""
    if note is None:
        return None
    return text.clean_text(note, "note", max_length=MAX_NOTE, allow_empty=True) or None


async def target_of(
    conn: Queryable,
    reporter: Member,
    post_id: uuid.UUID | None,
    comment_id: uuid.UUID | None,
    external_id: str | None,
) -> Target:
    """Exactly one of the three names the target; what the reporter cannot see is NOT_FOUND, so a
    report never tells them more than a read would. Reporting oneself is refused."""
    named = [x for x in (post_id, comment_id, external_id) if x is not None]
    if len(named) != 1:
        raise BadInput("name exactly one of postId, commentId and externalUserId")
    if post_id is not None:
        post = await posts_db.get(conn, post_id)
        if post is None or not await posts_db.is_visible(conn, post_id, reporter.id):
            raise NotFound("post not found")
        found = Target("post", post.id, post.author_id, post_id=post.id)
    elif comment_id is not None:
        comment = (await comments_db.by_ids(conn, [comment_id])).get(comment_id)
        if comment is None or not await posts_db.is_visible(conn, comment.post_id, reporter.id):
            raise NotFound("comment not found")
        found = Target("comment", comment.id, comment.author_id, comment_id=comment.id)
    else:
        member = await members_svc.target(conn, str(external_id))
        found = Target("member", member.id, member.id)
    if found.member_id == reporter.id:
        raise BadInput("you cannot report yourself or what you wrote")
    return found


async def file(conn: asyncpg.Connection, reporter: Member, target: Target, reason: str, note: str | None) -> Report:
    """A second open report of the same target by the same reporter returns the first (and spends no
    allowance); past HOURLY_LIMIT new reports in an hour, RATE_LIMITED. The reporter's row lock makes
    the count and the insert one step against their concurrent reports."""
    if reason not in REASONS:
        raise BadInput("reason is not one of the report reasons")
    note = clean_note(note)
    existing = await reports_db.open_by(conn, reporter.id, target)
    if existing is not None:
        return existing
    await members_db.lock(conn, reporter.id)
    if await reports_db.filed_since(conn, reporter.id, _HOUR) >= HOURLY_LIMIT:
        existing = await reports_db.open_by(conn, reporter.id, target)
        if existing is not None:
            return existing
        raise RateLimited(f"at most {HOURLY_LIMIT} reports an hour; try again later")
    report_id = new_id()
    if not await reports_db.insert(conn, report_id, reporter.id, target, reason, note):
        existing = await reports_db.open_by(conn, reporter.id, target)
        if existing is None:  # resolved between the conflict and this read: file it anew
            await reports_db.insert(conn, report_id, reporter.id, target, reason, note)
        else:
            return existing
    report = await reports_db.get(conn, report_id)
    assert report is not None
    return report


async def also_block(conn: asyncpg.Connection, settings: Settings, reporter: Member, target: Target) -> None:
    """alsoBlock: the reported member blocked in the report's transaction, by `block`'s own path (its
    follows and favourites ended both ways, its event, the relations versions)."""
    blocked = (await members_db.by_ids(conn, [target.member_id])).get(target.member_id)
    if blocked is None:
        raise NotFound("member not found")
    await safety.block_member(conn, settings, reporter, blocked)


def _action_fits(action: str, target_kind: str) -> bool:
    return action in ("dismiss", "suspend_member") or (action, target_kind) in (
        ("hold_post", "post"),
        ("delete_comment", "comment"),
    )


async def resolve(
    conn: asyncpg.Connection, settings: Settings, admin: Member, report_id: uuid.UUID, action: str
) -> Report:
    """Applies `action` to the report's target and resolves every open report on it the same way.
    A report already resolved is returned as it is: a second moderator's click changes nothing."""
    if action not in ACTIONS:
        raise BadInput("action is not one of the report actions")
    status = await reports_db.lock(conn, report_id)
    if status is None:
        raise NotFound("report not found")
    report = await reports_db.get(conn, report_id)
    assert report is not None
    if status != "open":
        return report
    if not _action_fits(action, report.target_kind):
        raise BadInput(f"{action.upper()} does not apply to a report of a {report.target_kind}")
    if action == "hold_post":
        try:
            await posts_svc.set_held(conn, settings, report.target_id, True)
        except NotFound:
            pass  # its author deleted it meanwhile: nothing is left to hold, the reports still close
    elif action == "delete_comment":
        if await comments_db.get_for_update(conn, report.target_id) is not None:
            await comments_db.mark_deleted(conn, report.target_id)
    elif action == "suspend_member":
        member = (await members_db.by_ids(conn, [report.member_id])).get(report.member_id)
        if member is None:
            raise NotFound("member not found")
        await members_svc.set_suspended(conn, member.external_id, True)
    resolved = "dismissed" if action == "dismiss" else "actioned"
    await reports_db.resolve_target(conn, report.target_kind, report.target_id, resolved, action, admin.id)
    done = await reports_db.get(conn, report_id)
    assert done is not None
    return done


async def queue(conn: Queryable, status: str, after: uuid.UUID | None, limit: int) -> list[Report]:
    if status not in STATUSES:
        raise BadInput("status is not a report status")
    return await reports_db.queue_page(conn, status, after, limit + 1)


async def mine(conn: Queryable, reporter: Member, before: uuid.UUID | None, limit: int) -> list[Report]:
    return await reports_db.reporter_page(conn, reporter.id, before, limit + 1)
