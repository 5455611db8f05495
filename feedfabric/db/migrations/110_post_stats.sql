-- Like and comment counts become authoritative: triggers keep post_stats in
-- step with likes, comments and members, whoever writes them, as 070 does for
-- follows. Reads used to count rows, so every page showing a post scanned its
-- likes: one post with 10,000 likes added 3.3 ms of Postgres to each page view.
--
-- `comments` counts comments by active members only, the rule the reads had:
-- a member's suspension takes their comments out of the counts of the posts
-- they commented on, and their return puts them back.

CREATE TABLE post_stats (
    post_id   uuid PRIMARY KEY REFERENCES posts (id),
    likes     integer NOT NULL DEFAULT 0,
    comments  integer NOT NULL DEFAULT 0
);

-- The suspension trigger finds a member's comments by author.
CREATE INDEX comments_author_idx ON comments (author_id, post_id);

CREATE FUNCTION bump_post_stats(post uuid, d_likes integer, d_comments integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO post_stats (post_id, likes, comments)
    VALUES (post, d_likes, d_comments)
    ON CONFLICT (post_id) DO UPDATE
       SET likes = post_stats.likes + EXCLUDED.likes,
           comments = post_stats.comments + EXCLUDED.comments
$$;

CREATE FUNCTION likes_post_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM bump_post_stats(NEW.post_id, 1, 0);
    ELSE
        PERFORM bump_post_stats(OLD.post_id, -1, 0);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER likes_post_stats AFTER INSERT OR DELETE ON likes
    FOR EACH ROW EXECUTE FUNCTION likes_post_stats();

CREATE FUNCTION comments_post_stats() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    author_status text;
BEGIN
    -- The author's row is share-locked whatever its status: a status change being written waits for
    -- this comment and then moves it with the author's others, or commits first and its status is
    -- read here. (Locking only an active row let a comment by a member being reinstated go uncounted
    -- by both.) The post's row is made even for a comment not counted, so the author's return has a
    -- row to count it in.
    SELECT status INTO author_status FROM members WHERE id = NEW.author_id FOR SHARE;
    PERFORM bump_post_stats(NEW.post_id, 0, CASE WHEN author_status = 'active' THEN 1 ELSE 0 END);
    RETURN NULL;
END
$$;

CREATE TRIGGER comments_post_stats AFTER INSERT ON comments
    FOR EACH ROW EXECUTE FUNCTION comments_post_stats();

CREATE FUNCTION members_post_stats() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta integer;
BEGIN
    IF (OLD.status = 'active') = (NEW.status = 'active') THEN
        RETURN NULL;
    END IF;
    delta := CASE WHEN NEW.status = 'active' THEN 1 ELSE -1 END;
    -- Rows locked in post order, so two members changing at once cannot deadlock on the posts they share.
    PERFORM 1 FROM post_stats
    WHERE post_id IN (SELECT post_id FROM comments WHERE author_id = NEW.id)
    ORDER BY post_id FOR UPDATE;
    UPDATE post_stats s SET comments = s.comments + delta * c.n
    FROM (SELECT post_id, count(*) AS n FROM comments WHERE author_id = NEW.id GROUP BY post_id) c
    WHERE s.post_id = c.post_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER members_post_stats AFTER UPDATE OF status ON members
    FOR EACH ROW EXECUTE FUNCTION members_post_stats();

-- Count once from the rows themselves. The triggers above already hold off writers of likes and
-- comments (CREATE TRIGGER locks the table until this migration commits), so nothing slips between.
INSERT INTO post_stats (post_id, likes, comments)
SELECT post_id, sum(likes), sum(comments) FROM (
    SELECT post_id, count(*) AS likes, 0 AS comments FROM likes GROUP BY post_id
    UNION ALL
    SELECT c.post_id, 0, count(*) FILTER (WHERE m.status = 'active')
    FROM comments c JOIN members m ON m.id = c.author_id GROUP BY c.post_id
) counts
GROUP BY post_id;
