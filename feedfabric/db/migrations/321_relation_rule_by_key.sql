-- visible_posts and feed_posts (migration 320) with each relation tested by its whole key: one NOT EXISTS
-- for the author and one for a repost's original's author, each direction an equality on both columns
-- of an index (blocks' primary key, blocks_blocked_idx, mutes' primary key). With `= ANY (ARRAY[...])`
-- Postgres could not make the outer row's authors an index condition and read all of the viewer's
-- blocks for each post (10,000 rows a post for a viewer with 10,000 blocks); by key it is one probe.
CREATE OR REPLACE FUNCTION visible_posts(viewer uuid) RETURNS SETOF posts
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.* FROM posts p
    JOIN members m ON m.id = p.author_id AND m.status = 'active'
    LEFT JOIN posts o ON o.id = p.repost_of
    LEFT JOIN members om ON om.id = o.author_id
    WHERE (p.status = 'live' OR (p.status = 'held' AND p.author_id = viewer))
      AND (p.repost_of IS NULL
           OR ((o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer)) AND om.status = 'active'))
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocker_id = viewer AND b.blocked_id = p.author_id)
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocked_id = viewer AND b.blocker_id = p.author_id)
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocker_id = viewer AND b.blocked_id = o.author_id)
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocked_id = viewer AND b.blocker_id = o.author_id)
$$;

CREATE OR REPLACE FUNCTION feed_posts(viewer uuid) RETURNS SETOF posts
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.* FROM posts p
    JOIN members m ON m.id = p.author_id AND m.status = 'active'
    LEFT JOIN posts o ON o.id = p.repost_of
    LEFT JOIN members om ON om.id = o.author_id
    WHERE (p.status = 'live' OR (p.status = 'held' AND p.author_id = viewer))
      AND (p.repost_of IS NULL
           OR ((o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer)) AND om.status = 'active'))
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocker_id = viewer AND b.blocked_id = p.author_id)
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocked_id = viewer AND b.blocker_id = p.author_id)
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocker_id = viewer AND b.blocked_id = o.author_id)
      AND NOT EXISTS (SELECT 1 FROM blocks b WHERE b.blocked_id = viewer AND b.blocker_id = o.author_id)
      AND NOT EXISTS (SELECT 1 FROM mutes u WHERE u.muter_id = viewer AND u.muted_id = p.author_id
                                              AND (u.expires_at IS NULL OR u.expires_at > now()))
      AND NOT EXISTS (SELECT 1 FROM mutes u WHERE u.muter_id = viewer AND u.muted_id = o.author_id
                                              AND (u.expires_at IS NULL OR u.expires_at > now()))
$$;
