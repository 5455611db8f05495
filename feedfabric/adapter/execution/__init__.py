"""The GraphQL engine room: every execution-context subclass, and the live renderer, in one place.

What it does, on top of Strawberry's execution context:
- a post's shared part is completed once per post version and reused across
  viewers and requests (render_once);
- a live item is executed once for every subscriber whose selection reads
  nothing about the viewer, and its text shared (subscriptions, renderings);
- a live homeTimeline handed to a listener is rendered with its subscription's
  own executor (live).

It knows the schema's viewer marks only through FieldMarks (marks), and the
app hands it to the schema when it builds it (`engine`, feedfabric.app): the
schema works without it, only without the sharing.

The version pins, and why. Strawberry's `execution_context_class` option and
graphql-core's `Executor.build`, `execute_operation`,
`build_per_event_executor` and `execute_subscription_event` are public. Four
methods of graphql-core's `Executor` that this room overrides or calls are
marked `:meta private:` in graphql-core 3.3.2, so graphql-core is pinned to
3.3.2 (and Strawberry, whose execution context subclasses it, to 0.341) in
pyproject.toml:
- `complete_object_value`: overridden to split a Post's completion into its
  shared and per-viewer parts (render_once);
- `handle_field_error`: overridden to count field errors, so a shared part
  that reported one is not kept (render_once);
- `execute_fields`: called to complete each part with the grouped fields it
  was given (render_once);
- `collect_subfields`: called to group a Post's sub-selection by response key
  before it is split (render_once).
tests/adapter/test_render_once.py holds their signatures (a release that
reshapes them fails there rather than completing posts wrongly) and compares
cached pages with uncached executions. No file outside this folder names them.
"""

from __future__ import annotations

from weakref import WeakValueDictionary

from feedfabric.adapter.execution.marks import FieldMarks
from feedfabric.adapter.execution.render_once import PostRenders, RenderOnceExecutionContext

__all__ = ["FieldMarks", "PostRenders", "RenderOnceExecutionContext", "engine"]


def engine(marks: FieldMarks) -> type[RenderOnceExecutionContext]:
    """The execution context class of one schema, with its marks and its caches (one set per schema)."""
    return type(
        "FeedFabricExecutionContext",
        (RenderOnceExecutionContext,),
        {
            "marks": marks,
            "renders": PostRenders(marks),
            "live_renderers": WeakValueDictionary(),
            "__module__": __name__,
        },
    )
