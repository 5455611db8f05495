"""JSON shapes of the REST routes, as pure mappings: feed posts are the FeedPosts GraphQL renders too
(feeds.feed_posts), built by the resolvers."""

from __future__ import annotations

from collections.abc import Mapping

from feedfabric.core.models import FeedPage, FeedPost, Member, Mention, MentionsPage, Page, Post

__all__ = ["member"]


def member(row: Member) -> dict[str, object]:
    return {
        "id": str(row.id),
        "externalId": row.external_id,
        "username": row.username,
        "displayName": row.display_name,
        "avatarUrl": row.avatar_url,
    }


def media(row: Mapping[str, object]) -> dict[str, object]:
    ready = row["status"] == "ready"
    return {
        "id": str(row["id"]),
        "status": str(row["status"]).upper(),
        "contentType": row["content_type"],
        "width": row["width"],
        "height": row["height"],
        "score": row["score"],
        "url": f"/media/{row['id']}" if ready else None,
        "reason": row["reason"] if row["status"] == "rejected" else None,
    }


def bare_post(row: Post) -> dict[str, object]:
    return {
        "id": str(row.id),
        "authorId": str(row.author_id),
        "content": row.content,
        "repostOf": str(row.repost_of) if row.repost_of else None,
        "status": row.status.upper(),
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat() if row.updated_at else None,
    }


def feed_post(post: FeedPost) -> dict[str, object]:
    """A feed post (feeds.feed_posts) as every REST feed route answers it."""
    author = post.author
    out = bare_post(post.row)
    out.update(
        authorUsername=author.username if author else None,
        authorDisplayName=author.display_name if author else None,
        authorAvatarUrl=author.avatar_url if author else None,
        tags=list(post.tags),
        media=[media(m) for m in post.media],
        likeCount=post.like_count,
        commentCount=post.comment_count,
        viewerHasLiked=post.viewer_liked,
    )
    if post.original is not None:
        out["repost"] = feed_post(post.original)
    return out


def feed_page(page: FeedPage, posts: list[dict[str, object]] | None = None) -> dict[str, object]:
    """The page as REST sends it; `posts` when the caller serialized them with more of its own (For You)."""
    shown = [feed_post(p) for p in page.posts] if posts is None else posts
    return {"posts": shown, "nextCursor": page.next_cursor, "source": page.source}


def bare_page(page: Page) -> dict[str, object]:
    return {"posts": [bare_post(p) for p in page.items], "nextCursor": page.next_cursor, "source": page.source}


def mention(item: Mention) -> dict[str, object] | None:
    if item.post is not None:
        return {"type": "post", **feed_post(item.post)}
    comment, author = item.comment, item.comment_author
    if comment is None or author is None:
        return None
    return {
        "type": "comment",
        "id": str(comment.id),
        "postId": str(comment.post_id),
        "authorUsername": author.username,
        "content": comment.content,
        "createdAt": comment.created_at.isoformat(),
    }


def mentions_page(page: MentionsPage) -> dict[str, object]:
    items = [m for m in map(mention, page.mentions) if m is not None]
    return {"posts": items, "nextCursor": page.next_cursor, "source": page.source}


def member_page(page: Page) -> dict[str, object]:
    """A page of listed members (feeds.members.Listed): GET /blocks, GET /mutes."""
    return {"members": [member(listed.member) for listed in page.items], "nextCursor": page.next_cursor}
