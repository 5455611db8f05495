-- post_visible, the one visibility rule, unchanged in meaning, now in PL/pgSQL.
-- A SQL function whose body has sub-selects is never inlined, so Postgres ran
-- it as a query of its own for every row it filtered: about 43 us a call, 0.9
-- of the 1.1 ms it took to hydrate a 21-post home-feed page (10,000 members,
-- 200,000 posts). PL/pgSQL keeps its statements' plans for the session and
-- stops at the first condition that fails: about 7 us a call. Where the SQL
-- body gave NULL (a held post, no viewer) this gives false; every caller reads
-- both as not visible (a WHERE condition, or bool() in Python).
CREATE OR REPLACE FUNCTION post_visible(p_status text, p_author uuid, p_repost_of uuid, viewer uuid)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF (p_status = 'live' OR (p_status = 'held' AND p_author = viewer)) IS NOT TRUE THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM members m WHERE m.id = p_author AND m.status = 'active') THEN
        RETURN false;
    END IF;
    RETURN p_repost_of IS NULL OR EXISTS (
        SELECT 1 FROM posts o JOIN members om ON om.id = o.author_id
        WHERE o.id = p_repost_of
          AND (o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer))
          AND om.status = 'active');
END
$$;

-- The celebrity rule's read (timeline_queries.followed_celebrities) joins a
-- member's follows to the few members above the threshold; without this index
-- it scanned every member's stats on each home-feed page (0.4-1.4 ms).
CREATE INDEX member_stats_followers_idx ON member_stats (followers);
