-- For You's TAGS source reads each interesting tag's newest posts of the look-back: post_tags keeps
-- its post's created_at (set from posts on insert, kept in step when a post's created_at changes) so
-- that is one short range of (tag, created_at) per tag. Without it the statement's generic plan
-- walked every post of the window and probed its tags (50-75 ms on the home-feed benchmark's data).
ALTER TABLE post_tags ADD COLUMN created_at timestamptz;
UPDATE post_tags pt SET created_at = p.created_at FROM posts p WHERE p.id = pt.post_id;
ALTER TABLE post_tags ALTER COLUMN created_at SET NOT NULL;

CREATE FUNCTION post_tags_created_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.created_at INTO NEW.created_at FROM posts p WHERE p.id = NEW.post_id;
    RETURN NEW;
END $$;
CREATE TRIGGER post_tags_created_at BEFORE INSERT ON post_tags
    FOR EACH ROW EXECUTE FUNCTION post_tags_created_at();

CREATE FUNCTION posts_created_at_to_tags() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE post_tags SET created_at = NEW.created_at WHERE post_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER posts_created_at_to_tags AFTER UPDATE OF created_at ON posts
    FOR EACH ROW WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION posts_created_at_to_tags();

CREATE INDEX post_tags_recent_idx ON post_tags (tag, created_at DESC);
