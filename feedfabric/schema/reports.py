"""Reports and moderation terms: their types and the Query and Mutation fields (mixed into the roots).

Pure mappings of what resolvers.reports returns; the reporter is shown to admins only.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from feedfabric.core.moderation import Term
from feedfabric.feeds.moderation_terms import MAX_TERMS
from feedfabric.resolvers import fields
from feedfabric.resolvers import reports as resolve
from feedfabric.schema.cost import MAX_ITEMS
from feedfabric.schema.types import Comment, ContextInfo, Member, PageInfo, Post


@strawberry.enum
class ReportReason(Enum):
    SPAM = "spam"
    HARASSMENT = "harassment"
    HATE = "hate"
    VIOLENCE = "violence"
    SEXUAL_CONTENT = "sexual_content"
    SELF_HARM = "self_harm"
    ILLEGAL = "illegal"
    OTHER = "other"


@strawberry.enum
class ReportStatus(Enum):
    OPEN = "open"
    ACTIONED = "actioned"
    DISMISSED = "dismissed"


@strawberry.enum(
    description="What a moderator did. Resolving one report resolves every open report on the same target the same way."
)
class ReportAction(Enum):
    DISMISS = "dismiss"
    HOLD_POST = "hold_post"
    DELETE_COMMENT = "delete_comment"
    SUSPEND_MEMBER = "suspend_member"


@strawberry.type
class Report:
    view: strawberry.Private[resolve.ReportView]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.view.report.id))

    @strawberry.field
    def reason(self) -> ReportReason:
        return ReportReason(self.view.report.reason)

    @strawberry.field(description="The reporter's words, at most 1,000 characters.")
    def note(self) -> str | None:
        return self.view.report.note

    @strawberry.field
    def status(self) -> ReportStatus:
        return ReportStatus(self.view.report.status)

    @strawberry.field
    def action(self) -> ReportAction | None:
        action = self.view.report.action
        return ReportAction(action) if action is not None else None

    @strawberry.field
    def created_at(self) -> datetime:
        return self.view.report.created_at

    @strawberry.field
    def resolved_at(self) -> datetime | None:
        return self.view.report.resolved_at

    @strawberry.field(
        description="The reported member: the author of the reported post or comment, or the member reported."
    )
    async def member(self, info: ContextInfo) -> Member:
        return Member(row=await fields.existing_member(info.context, self.view.report.member_id))

    @strawberry.field
    def post(self) -> Post | None:
        return Post.of(self.view.post) if self.view.post is not None else None

    @strawberry.field
    def comment(self) -> Comment | None:
        return Comment(row=self.view.comment) if self.view.comment is not None else None

    @strawberry.field(
        description="Admin only; null for anyone else and for reports the system filed (a moderation term)."
    )
    async def reporter(self, info: ContextInfo) -> Member | None:
        reporter_id = self.view.report.reporter_id
        if not self.view.reporter_visible or reporter_id is None:
            return None
        return Member(row=await fields.existing_member(info.context, reporter_id))

    @strawberry.field(description="Open reports on the same target, this one included.")
    def open_reports_on_target(self) -> int:
        return self.view.report.open_on_target


@strawberry.type
class ReportEdge:
    cursor: str
    node: Report


@strawberry.type
class ReportConnection:
    edges: list[ReportEdge]
    page_info: PageInfo

    @classmethod
    def of(cls, page: resolve.ReportPage, after: str | None) -> ReportConnection:
        edges = [ReportEdge(cursor=str(v.report.id), node=Report(view=v)) for v in page.items]
        return cls(edges=edges, page_info=PageInfo.of(page, edges, after))


@strawberry.input
class ReportInput:
    post_id: strawberry.ID | None = strawberry.field(
        default=None, description="Exactly one of postId, commentId and externalUserId."
    )
    comment_id: strawberry.ID | None = None
    external_user_id: str | None = None
    reason: ReportReason
    note: str | None = None
    also_block: bool | None = strawberry.field(default=False, description="Also block the reported member.")


@strawberry.type(
    description="Admin: a phrase that holds a new or edited post for review (same matching as a whole-word muted word)."
)
class ModerationTerm:
    row: strawberry.Private[Term]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    def phrase(self) -> str:
        return self.row.phrase

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at


def _status(status: ReportStatus | None) -> str:
    return (status or ReportStatus.OPEN).value


@strawberry.type
class ReportQuery:
    @strawberry.field(description="The viewer's own reports, newest first.")
    async def my_reports(self, info: ContextInfo, first: int | None = 20, after: str | None = None) -> ReportConnection:
        return ReportConnection.of(await resolve.my_reports(info.context, first, after), after)

    @strawberry.field(description="Admin only: the moderation queue, oldest first.")
    async def reports(
        self,
        info: ContextInfo,
        status: ReportStatus | None = ReportStatus.OPEN,
        first: int | None = 20,
        after: str | None = None,
    ) -> ReportConnection:
        return ReportConnection.of(await resolve.queue(info.context, _status(status), first, after), after)

    # All of them, up to the cap: the query cost counts that many (a page's 100 was less).
    @strawberry.field(description="Admin only, newest first.", metadata={MAX_ITEMS: MAX_TERMS})
    async def moderation_terms(self, info: ContextInfo) -> list[ModerationTerm]:
        return [ModerationTerm(row=t) for t in await resolve.terms(info.context)]


@strawberry.type
class ReportMutation:
    @strawberry.mutation(
        description="POST /reports. A second open report of the same target by the same member returns the first."
    )
    async def report(self, info: ContextInfo, input: ReportInput) -> Report:
        given = resolve.ReportInput(
            post_id=input.post_id,
            comment_id=input.comment_id,
            external_user_id=input.external_user_id,
            reason=input.reason.value,
            note=input.note,
            also_block=bool(input.also_block),
        )
        return Report(view=await resolve.report(info.context, given))

    @strawberry.mutation(description="Admin only.")
    async def resolve_report(self, info: ContextInfo, id: strawberry.ID, action: ReportAction) -> Report:
        return Report(view=await resolve.resolve(info.context, id, action.value))

    @strawberry.mutation(description="Admin only.")
    async def add_moderation_term(self, info: ContextInfo, phrase: str) -> ModerationTerm:
        return ModerationTerm(row=await resolve.add_term(info.context, phrase))

    @strawberry.mutation(description="Admin only.")
    async def remove_moderation_term(self, info: ContextInfo, id: strawberry.ID) -> bool:
        return await resolve.remove_term(info.context, id)
