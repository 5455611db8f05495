"""POST /reports: the `report` mutation over REST, answered 201 with the report."""

from __future__ import annotations

from starlette.requests import Request

from feedfabric.core.errors import BadInput
from feedfabric.resolvers import reports as resolve
from feedfabric.resolvers.context import Context
from feedfabric.rest.responses import JSONResponse

_KEYS = {"postId", "commentId", "externalUserId", "reason", "note", "alsoBlock"}


def report(view: resolve.ReportView) -> dict[str, object]:
    """The report as its reporter sees it (REST has no admin view of the queue)."""
    r = view.report
    return {
        "id": str(r.id),
        "reason": r.reason.upper(),
        "note": r.note,
        "status": r.status.upper(),
        "action": r.action.upper() if r.action else None,
        "createdAt": r.created_at.isoformat(),
        "resolvedAt": r.resolved_at.isoformat() if r.resolved_at else None,
        "memberId": str(r.member_id),
        "postId": str(r.post_id) if r.post_id and view.post is not None else None,
        "commentId": str(r.comment_id) if r.comment_id and view.comment is not None else None,
        "openReportsOnTarget": r.open_on_target,
    }


def _optional_text(body: dict[str, object], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{key} must be a string")
    return value


async def _body(request: Request) -> resolve.ReportInput:
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        raise BadInput("the body must be a JSON object") from None
    if not isinstance(body, dict) or set(body) - _KEYS:
        raise BadInput("the body takes postId, commentId, externalUserId, reason, note and alsoBlock")
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.isupper():
        raise BadInput("reason must be one of the report reasons, e.g. SPAM")
    also_block = body.get("alsoBlock", False)
    if not isinstance(also_block, bool):
        raise BadInput("alsoBlock must be true or false")
    return resolve.ReportInput(
        post_id=_optional_text(body, "postId"),
        comment_id=_optional_text(body, "commentId"),
        external_user_id=_optional_text(body, "externalUserId"),
        reason=reason.lower(),
        note=_optional_text(body, "note"),
        also_block=also_block,
    )


async def post_report(ctx: Context, request: Request) -> JSONResponse:
    ctx.viewer.require_member()
    view = await resolve.report(ctx, await _body(request))
    return JSONResponse({"report": report(view)}, 201)
