-- Follower counts per statement, not per row: a bulk load of 100,000 follows
-- of one author updated that author's member_stats row 100,000 times in one
-- transaction, each update walking the row's earlier versions (quadratic, over
-- 13 minutes). The statement-level triggers read the transition tables, sum
-- the change per member and write each member_stats row once, members in ID
-- order so two statements locking the same rows cannot deadlock. A single
-- follow still writes the same two rows once each.

DROP TRIGGER follows_member_stats ON follows;
DROP FUNCTION follows_member_stats();

-- One function for both triggers: plpgsql plans a statement when it first
-- runs it, so each trigger only ever plans the branch naming its own table.
CREATE FUNCTION follows_member_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO member_stats AS s (member_id, followers, following)
        SELECT member, sum(d_followers), sum(d_following)
        FROM (SELECT target_id::uuid AS member, 1 AS d_followers, 0 AS d_following
              FROM inserted WHERE target_type = 'member'
              UNION ALL
              SELECT follower_id, 0, 1 FROM inserted WHERE target_type = 'member') d
        GROUP BY member
        ORDER BY member
        ON CONFLICT (member_id) DO UPDATE
           SET followers = s.followers + EXCLUDED.followers,
               following = s.following + EXCLUDED.following;
    ELSE
        INSERT INTO member_stats AS s (member_id, followers, following)
        SELECT member, sum(d_followers), sum(d_following)
        FROM (SELECT target_id::uuid AS member, -1 AS d_followers, 0 AS d_following
              FROM deleted WHERE target_type = 'member'
              UNION ALL
              SELECT follower_id, 0, -1 FROM deleted WHERE target_type = 'member') d
        GROUP BY member
        ORDER BY member
        ON CONFLICT (member_id) DO UPDATE
           SET followers = s.followers + EXCLUDED.followers,
               following = s.following + EXCLUDED.following;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER follows_member_stats_insert AFTER INSERT ON follows
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION follows_member_stats();

CREATE TRIGGER follows_member_stats_delete AFTER DELETE ON follows
    REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION follows_member_stats();
