-- Safety (OPERATIONS.md, "Safety"): blocks, mutes and muted words, and the visibility rule that reads them.
--
-- A member's relations (whom they block, who blocks them, whom they mute, their muted words) change
-- together under one number, members.relations_version, bumped in the transaction of every change on
-- both sides of a block and on the muter's side of a mute or a word. The viewer lookup every request
-- makes reads it with the member, so an API process keeps a member's relations (and their compiled
-- muted-word matcher) in memory keyed by that number, reads them once per change, and any instance
-- sees a change on its next read (feeds.relations).
ALTER TABLE members ADD COLUMN relations_version bigint NOT NULL DEFAULT 0;

-- A blocks B: who blocked whom is private (only the blocker lists it); the effects are mutual.
CREATE TABLE blocks (
    blocker_id  uuid NOT NULL REFERENCES members (id),
    blocked_id  uuid NOT NULL REFERENCES members (id),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (blocker_id, blocked_id),
    CHECK (blocker_id <> blocked_id)
);
-- "Who blocks me" (the other direction of the rule) and "my blocks, most recent first" (GET /blocks).
CREATE INDEX blocks_blocked_idx ON blocks (blocked_id, blocker_id);
CREATE INDEX blocks_recent_idx ON blocks (blocker_id, created_at DESC, blocked_id);

-- A mutes B: one way; `notifications` also silences B's notifications and mentions; an expiry ends it
-- by itself (every reader compares it with now(), nothing deletes the row on time).
CREATE TABLE mutes (
    muter_id       uuid NOT NULL REFERENCES members (id),
    muted_id       uuid NOT NULL REFERENCES members (id),
    notifications  boolean NOT NULL DEFAULT true,
    expires_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (muter_id, muted_id),
    CHECK (muter_id <> muted_id)
);
CREATE INDEX mutes_recent_idx ON mutes (muter_id, created_at DESC, muted_id);

-- Muted words: matched in the API process (feeds.matcher), never in SQL. `contexts` empty: all of them.
CREATE TABLE muted_words (
    id          uuid PRIMARY KEY,
    member_id   uuid NOT NULL REFERENCES members (id),
    phrase      text NOT NULL,
    whole_word  boolean NOT NULL DEFAULT true,
    contexts    text[] NOT NULL DEFAULT '{}',
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX muted_words_member_idx ON muted_words (member_id, id DESC);

-- visible_posts(viewer), migration 101's rule, now with the viewer's blocks both ways: a post whose
-- author, or whose shared original's author, blocks the viewer or is blocked by them is not there.
-- Each direction is one primary-key (or blocks_blocked_idx) probe per row, so the cost does not grow
-- with the number of blocks. Still one SELECT in LANGUAGE sql: Postgres inlines it.
CREATE OR REPLACE FUNCTION visible_posts(viewer uuid) RETURNS SETOF posts
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.* FROM posts p
    JOIN members m ON m.id = p.author_id AND m.status = 'active'
    LEFT JOIN posts o ON o.id = p.repost_of
    LEFT JOIN members om ON om.id = o.author_id
    WHERE (p.status = 'live' OR (p.status = 'held' AND p.author_id = viewer))
      AND (p.repost_of IS NULL
           OR ((o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer)) AND om.status = 'active'))
      AND NOT EXISTS (SELECT 1 FROM blocks b
                      WHERE b.blocker_id = viewer AND b.blocked_id = ANY (ARRAY[p.author_id, o.author_id]))
      AND NOT EXISTS (SELECT 1 FROM blocks b
                      WHERE b.blocked_id = viewer AND b.blocker_id = ANY (ARRAY[p.author_id, o.author_id]))
$$;

-- feed_posts(viewer): what the viewer's feeds (home and its live items, favourites, tags, For You,
-- similar posts) show: visible_posts less the posts, and reposts of the posts, of members the viewer
-- mutes and has not seen the mute expire. post(id), a member's posts and playlists read visible_posts:
-- a mute keeps a member out of the feeds, it does not hide them.
CREATE FUNCTION feed_posts(viewer uuid) RETURNS SETOF posts
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.* FROM posts p
    JOIN members m ON m.id = p.author_id AND m.status = 'active'
    LEFT JOIN posts o ON o.id = p.repost_of
    LEFT JOIN members om ON om.id = o.author_id
    WHERE (p.status = 'live' OR (p.status = 'held' AND p.author_id = viewer))
      AND (p.repost_of IS NULL
           OR ((o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer)) AND om.status = 'active'))
      AND NOT EXISTS (SELECT 1 FROM blocks b
                      WHERE b.blocker_id = viewer AND b.blocked_id = ANY (ARRAY[p.author_id, o.author_id]))
      AND NOT EXISTS (SELECT 1 FROM blocks b
                      WHERE b.blocked_id = viewer AND b.blocker_id = ANY (ARRAY[p.author_id, o.author_id]))
      AND NOT EXISTS (SELECT 1 FROM mutes u
                      WHERE u.muter_id = viewer AND u.muted_id = ANY (ARRAY[p.author_id, o.author_id])
                        AND (u.expires_at IS NULL OR u.expires_at > now()))
$$;

-- member_hidden(viewer, other, notifications): the rule for an actor rather than a post (a comment's
-- author, a mention's, a notification's actor): blocked either way; with `for_notifications` also
-- muted with notifications by the viewer (unexpired). PL/pgSQL: stops at the first condition met.
CREATE FUNCTION member_hidden(viewer uuid, other uuid, for_notifications boolean)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF viewer IS NULL OR other IS NULL OR viewer = other THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM blocks b WHERE b.blocker_id = viewer AND b.blocked_id = other)
       OR EXISTS (SELECT 1 FROM blocks b WHERE b.blocker_id = other AND b.blocked_id = viewer) THEN
        RETURN true;
    END IF;
    RETURN for_notifications AND EXISTS (
        SELECT 1 FROM mutes u WHERE u.muter_id = viewer AND u.muted_id = other AND u.notifications
          AND (u.expires_at IS NULL OR u.expires_at > now()));
END
$$;

-- post_visible, the per-row form of visible_posts (realtime delivery, notifications), with the blocks.
CREATE OR REPLACE FUNCTION post_visible(p_status text, p_author uuid, p_repost_of uuid, viewer uuid)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    original_author uuid;
BEGIN
    IF (p_status = 'live' OR (p_status = 'held' AND p_author = viewer)) IS NOT TRUE THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM members m WHERE m.id = p_author AND m.status = 'active') THEN
        RETURN false;
    END IF;
    IF member_hidden(viewer, p_author, false) THEN
        RETURN false;
    END IF;
    IF p_repost_of IS NULL THEN
        RETURN true;
    END IF;
    SELECT o.author_id INTO original_author FROM posts o JOIN members om ON om.id = o.author_id
    WHERE o.id = p_repost_of
      AND (o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer))
      AND om.status = 'active';
    RETURN original_author IS NOT NULL AND NOT member_hidden(viewer, original_author, false);
END
$$;
