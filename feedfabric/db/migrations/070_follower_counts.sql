-- Follower counts become authoritative: a trigger keeps member_stats in step
-- with every insert and delete on follows, whoever writes them, and one SQL
-- function says who is a celebrity. Fan-out, rebuild, the home feed and
-- verify all ask it, so they agree, and none counts follows rows any more.

CREATE FUNCTION bump_member_stats(member uuid, d_followers integer, d_following integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO member_stats (member_id, followers, following)
    VALUES (member, d_followers, d_following)
    ON CONFLICT (member_id) DO UPDATE
       SET followers = member_stats.followers + EXCLUDED.followers,
           following = member_stats.following + EXCLUDED.following
$$;

CREATE FUNCTION follows_member_stats() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row follows;
    delta integer;
BEGIN
    IF TG_OP = 'INSERT' THEN row := NEW; delta := 1; ELSE row := OLD; delta := -1; END IF;
    IF row.target_type = 'member' THEN
        -- Both rows are locked in ID order, so A following B while B follows A cannot deadlock.
        IF row.follower_id < row.target_id::uuid THEN
            PERFORM bump_member_stats(row.follower_id, 0, delta);
            PERFORM bump_member_stats(row.target_id::uuid, delta, 0);
        ELSE
            PERFORM bump_member_stats(row.target_id::uuid, delta, 0);
            PERFORM bump_member_stats(row.follower_id, 0, delta);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER follows_member_stats AFTER INSERT OR DELETE ON follows
    FOR EACH ROW EXECUTE FUNCTION follows_member_stats();

-- Recount once from the rows themselves.
DELETE FROM member_stats;
INSERT INTO member_stats (member_id, followers, following)
SELECT id, followers, following FROM (
    SELECT m.id,
           (SELECT count(*) FROM follows f WHERE f.target_type = 'member' AND f.target_id = m.id::text) AS followers,
           (SELECT count(*) FROM follows f WHERE f.target_type = 'member' AND f.follower_id = m.id) AS following
    FROM members m
) counts
WHERE followers > 0 OR following > 0;

CREATE FUNCTION is_celebrity(member uuid, threshold integer)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE((SELECT s.followers > threshold FROM member_stats s WHERE s.member_id = member), false)
$$;
