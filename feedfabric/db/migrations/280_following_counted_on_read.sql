-- A bulk load of a million follows of one author spent more time in the
-- counting trigger than in the insert itself (57 s against 24 s): besides the
-- author's one row, every follower's `following` count was a new member_stats
-- row, a million upserts each checking its foreign key, and the statement's
-- million-group aggregate spilled to disk. Only `followers` needs keeping:
-- the celebrity rule reads it on every fan-out and home-feed page, and a
-- celebrity's followers are too many to count on read. `following` is counted
-- on read instead (`db/follows.member_stats`: an index-only range of the
-- follows primary key, whose rows a member writes one by one), so the trigger
-- aggregates by target only: one row for the load of one author, whatever its
-- size. A single follow writes one member_stats row instead of two. Rows are
-- still written in member ID order, so two statements cannot deadlock.

CREATE OR REPLACE FUNCTION follows_member_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO member_stats AS s (member_id, followers)
        SELECT target_id::uuid, count(*) FROM inserted WHERE target_type = 'member'
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (member_id) DO UPDATE SET followers = s.followers + EXCLUDED.followers;
    ELSE
        INSERT INTO member_stats AS s (member_id, followers)
        SELECT target_id::uuid, -count(*) FROM deleted WHERE target_type = 'member'
        GROUP BY 1 ORDER BY 1
        ON CONFLICT (member_id) DO UPDATE SET followers = s.followers + EXCLUDED.followers;
    END IF;
    RETURN NULL;
END
$$;

DROP FUNCTION bump_member_stats(uuid, integer, integer);
ALTER TABLE member_stats DROP COLUMN following;
