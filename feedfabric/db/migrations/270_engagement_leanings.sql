-- A reader's leanings, read from what they engaged with: how popular, and how new, the posts they
-- last liked or commented on were (the mean of the popularity and recency features, as
-- feedfabric.feeds.ranking computes them). For You ranks with them and the feed log keeps them as of
-- serving, so the ranker can learn that one reader's liking for popular or new posts is not another's.
-- Popularity is the post's count now; age is measured at the engagement.
CREATE FUNCTION engagement_leanings(member uuid, at timestamptz, comment_weight double precision)
RETURNS TABLE (popular double precision, fresh double precision)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(avg(ln(1 + GREATEST(COALESCE(s.likes + comment_weight * s.comments, 0), 0))), 0),
           COALESCE(avg(exp(-LEAST(GREATEST(extract(epoch FROM t.created_at - p.created_at), 0) / 86400.0, 50))), 0)
    FROM ((SELECT l.post_id, l.created_at FROM likes l
           WHERE l.member_id = member AND l.created_at <= at ORDER BY l.created_at DESC LIMIT 20)
          UNION ALL
          (SELECT c.post_id, c.created_at FROM comments c
           WHERE c.author_id = member AND c.created_at <= at ORDER BY c.created_at DESC LIMIT 20)
          ORDER BY created_at DESC LIMIT 20) t
    JOIN posts p ON p.id = t.post_id
    LEFT JOIN post_stats s ON s.post_id = t.post_id
$$;

ALTER TABLE feed_log ADD COLUMN popular_lean double precision NOT NULL DEFAULT 0,
                     ADD COLUMN fresh_lean double precision NOT NULL DEFAULT 0;
