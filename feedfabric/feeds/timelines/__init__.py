"""Redis timelines: every rule about what goes into `feed:{memberId}` and how it is read.

One sorted set per member; member = the post ID's 16 raw bytes, score = +inf
(`encode_member`). Equal scores sort by the member's bytes, and a UUIDv7's
bytes sort exactly as the IDs do, so Redis order is ID order and Redis and
Postgres pages are interchangeable: a cursor (always the UUID text) from
either works. Raw bytes and the one-token score make a 500-entry timeline
about 11.6 KB in a listpack instead of 24 KB.

Timelines written before hold the UUID text with the ID's Unix ms as score
(the *text form*). Both forms are read (`decode_member`) until those entries
are trimmed away or the timeline is rebuilt: every text entry scores below
every +inf one, and text entries were all written before raw ones, so a mixed
timeline is still newest first (bar posts fanned out by old and new workers in
the same moments of a deploy).

Fan-out on write pushes a post to its author, then to the active followers of
the author and of the post's tags, one keyset page of follows at a time. A
follow of a member merges their posts within the timeline's span (`merge`);
an unfollow (of a member or a tag) takes them back out (`unmerge`).
Authors with more than CELEBRITY_FOLLOWER_THRESHOLD followers are pushed to
their own timeline only: the home-feed reader pulls their posts from Postgres
(`first_round`). A rebuild holds exactly what fan-out would have pushed, so
the two never disagree.

A Redis that lost writes (restarted empty or from a stale snapshot, failed
over, flushed) must not have its old entries served as complete: a timeline
could miss posts in the middle, and a page would skip them. Each Redis run
is therefore *settled* against Postgres (`serving_floor`): the first run this
database ever used is trusted whole; any later run, or the same run after its
epoch key vanished, gets a floor, the newest post ID at settling time. Every
post whose fan-out could have gone to the lost data has an ID at or below the
floor (it was committed before the run was noticed), and every post above it
is pushed into this run, so entries above the floor are complete and readers
take the rest from Postgres, exactly as past the oldest entry of a trimmed
timeline. See docs/reliability.md.
"""

from feedfabric.feeds.timelines.encoding import (
    ID_TEXT_LENGTH,
    KEY_PREFIX,
    RAW_SCORE,
    cursor_forms,
    decode_entry,
    decode_member,
    encode_member,
    entries,
    feed_key,
    owed_key,
    pack_ids,
    score_of,
    shard_of,
    unpack_ids,
)
from feedfabric.feeds.timelines.epochs import EPOCH, EPOCH_KEY, serving_floor, settle
from feedfabric.feeds.timelines.fanout import (
    PUSH,
    FanoutResult,
    fan_out,
    merge,
    push,
    push_on_node,
    push_packed,
    rebuild,
    unmerge,
)
from feedfabric.feeds.timelines.owed import (
    OWE,
    OWED_TTL_S,
    drop_owed_in_postgres,
    fill_gap,
    raise_owed,
    raise_owed_in_postgres,
    read_owed,
    record_owed,
)
from feedfabric.feeds.timelines.reading import (
    OPEN,
    OPEN_FIRST,
    READ_PAGE,
    OpenedFirstPage,
    OpenedTimeline,
    TimelinePage,
    first_round,
    has_timeline,
    open_first_page,
    open_timeline,
    read_page,
    timeline_ids,
)

__all__ = [
    "EPOCH",
    "EPOCH_KEY",
    "ID_TEXT_LENGTH",
    "KEY_PREFIX",
    "OPEN",
    "OPEN_FIRST",
    "OWE",
    "OWED_TTL_S",
    "PUSH",
    "RAW_SCORE",
    "READ_PAGE",
    "FanoutResult",
    "OpenedFirstPage",
    "OpenedTimeline",
    "TimelinePage",
    "cursor_forms",
    "decode_entry",
    "decode_member",
    "drop_owed_in_postgres",
    "encode_member",
    "entries",
    "fan_out",
    "feed_key",
    "fill_gap",
    "first_round",
    "has_timeline",
    "merge",
    "open_first_page",
    "open_timeline",
    "owed_key",
    "pack_ids",
    "push",
    "push_on_node",
    "push_packed",
    "raise_owed",
    "raise_owed_in_postgres",
    "read_owed",
    "read_page",
    "rebuild",
    "record_owed",
    "score_of",
    "serving_floor",
    "settle",
    "shard_of",
    "timeline_ids",
    "unmerge",
    "unpack_ids",
]
