"""Post.shared_version covers everything a post's shared part shows: a completion kept by version is never stale.

The engine keeps a post's shared part (every field marked SAME_FOR_EVERY_VIEWER
and answered from the post, feedfabric.adapter.execution.render_once) by the
post's version. Here each input a post is built from is changed in turn, the
whole shared part is executed through GraphQL for the post before and after,
and wherever the shared part changed the version must have changed too. A
marked field that reads something the version does not cover fails here.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import strawberry
from feedfabric.app import schema as served
from feedfabric.core import models
from feedfabric.schema.core_schema import graphql_schema
from feedfabric.schema.types import Post
from graphql import GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLOutputType

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
AUTHOR = models.Member(uuid.uuid4(), "ext-1", "ann", "Ann", "/a.png", "active", NOW)
MEDIA = {
    "id": uuid.uuid4(),
    "status": "ready",
    "content_type": "image/png",
    "width": 640,
    "height": 480,
    "score": 0.25,
    "reason": None,
}
BASE = models.FeedPost(
    row=models.Post(uuid.uuid4(), AUTHOR.id, "hello #cats", None, "live", NOW, None),
    author=AUTHOR,
    tags=["cats"],
    media=[MEDIA],
    like_count=3,
    comment_count=1,
    viewer_liked=False,
)


@strawberry.type
class Probe:
    """A root whose one field is the post it is given as its root value."""

    @strawberry.field
    def post(self) -> Post:
        return self  # type: ignore[return-value]


PROBE = strawberry.Schema(query=Probe)


def shared_selection(type_name: str = "Post") -> str:
    """Every field the engine completes once per version: marked, from the object, without arguments."""
    marks = served.execution_context_class.marks  # type: ignore[attr-defined]
    served_type = graphql_schema(served).type_map[type_name]
    assert isinstance(served_type, GraphQLObjectType)
    picked = []
    for name, field in served_type.fields.items():
        if not marks.from_the_object(type_name, name) or any(
            isinstance(a.type, GraphQLNonNull) for a in field.args.values()
        ):
            continue
        inner = _named(field.type)
        sub = f" {{ {shared_selection(inner.name)} }}" if isinstance(inner, GraphQLObjectType) else ""
        picked.append(name + sub)
    return " ".join(picked)


def _named(of: GraphQLOutputType) -> GraphQLOutputType:
    while isinstance(of, GraphQLNonNull | GraphQLList):
        of = of.of_type
    return of


def shared_part(post: models.FeedPost, selection: str) -> object:
    """The shared part as a response shows it: its data and any error (an author gone nulls the post)."""
    result = PROBE.execute_sync(f"{{ post {{ {selection} }} }}", root_value=Post.of(post))
    return result.data, [error.message for error in result.errors or ()]


def variants() -> Iterator[tuple[str, models.FeedPost]]:
    """The post with one input changed: each column of its row, of its author and of its media, its tags,
    counts and whether the viewer liked it."""
    for name, value in dataclasses.asdict(BASE.row).items():
        yield f"row.{name}", dataclasses.replace(BASE, row=dataclasses.replace(BASE.row, **{name: _other(name, value)}))
    for name, value in dataclasses.asdict(AUTHOR).items():
        yield (
            f"author.{name}",
            dataclasses.replace(BASE, author=dataclasses.replace(AUTHOR, **{name: _other(name, value)})),
        )
    for name, value in MEDIA.items():
        yield f"media.{name}", dataclasses.replace(BASE, media=[{**MEDIA, name: _other(name, value)}])
    yield "media rejected", dataclasses.replace(BASE, media=[{**MEDIA, "status": "rejected", "reason": "too big"}])
    yield "no media", dataclasses.replace(BASE, media=[])
    yield "no author", dataclasses.replace(BASE, author=None)
    yield "tags", dataclasses.replace(BASE, tags=["cats", "dogs"])
    yield "like_count", dataclasses.replace(BASE, like_count=4)
    yield "comment_count", dataclasses.replace(BASE, comment_count=2)
    yield "viewer_liked", dataclasses.replace(BASE, viewer_liked=True)


def _other(name: str, value: object) -> object:
    """Another value of the same column."""
    if value is None:
        return {"repost_of": uuid.uuid4(), "updated_at": NOW, "avatar_url": "/b.png", "reason": "too big"}[name]
    if isinstance(value, uuid.UUID):
        return uuid.uuid4()
    if isinstance(value, datetime):
        return value + timedelta(seconds=1)
    states = {"live": "held", "active": "suspended", "ready": "rejected"}
    if isinstance(value, str):
        return states.get(value, value + " changed")
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    raise AssertionError(f"no other value for {name}")


def test_every_change_the_shared_part_shows_is_a_new_version() -> None:
    selection = shared_selection()
    for wanted in ("content", "likeCount", "author { ", "username", "media { ", "url"):
        assert wanted in selection, selection  # the shared part is what the engine shares, not a stub
    base_part = shared_part(BASE, selection)
    base_version = Post.of(BASE).shared_version()
    shown = 0
    for label, variant in variants():
        if shared_part(variant, selection) != base_part:
            shown += 1
            assert Post.of(variant).shared_version() != base_version, (
                f"{label} changes the shared part, not the version"
            )
    assert shown >= 15  # most inputs are shown: the comparison is not vacuous


def test_what_only_the_viewer_sees_is_no_new_version() -> None:
    """viewerHasLiked is completed per request: a version that changed with it would share nothing."""
    liked = dataclasses.replace(BASE, viewer_liked=True)
    assert Post.of(liked).shared_version() == Post.of(BASE).shared_version()
    hash(Post.of(BASE).shared_version())  # a version keys a dict
