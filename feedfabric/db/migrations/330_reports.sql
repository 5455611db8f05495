-- Reports (OPERATIONS.md, "Safety"): a member reports a post, a comment or a member; admins work the
-- queue oldest first. The ID is a UUIDv7, so ID order is filing order: the queue's and myReports'
-- keyset. target_id is the post's, the comment's or the member's ID; member_id is always the member
-- reported (the author of the post or comment), so Report.member needs no join and suspension needs
-- no lookup. reporter_id is NULL for the reports the system files (a moderation term matched).
CREATE TABLE reports (
    id           uuid PRIMARY KEY,
    reporter_id  uuid REFERENCES members (id),
    member_id    uuid NOT NULL REFERENCES members (id),
    target_kind  text NOT NULL CHECK (target_kind IN ('post', 'comment', 'member')),
    target_id    uuid NOT NULL,
    post_id      uuid REFERENCES posts (id),
    comment_id   uuid REFERENCES comments (id),
    reason       text NOT NULL CHECK (reason IN ('spam', 'harassment', 'hate', 'violence', 'sexual_content',
                                                 'self_harm', 'illegal', 'other')),
    note         text CHECK (char_length(note) <= 1000),
    status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'actioned', 'dismissed')),
    action       text CHECK (action IN ('dismiss', 'hold_post', 'delete_comment', 'suspend_member')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz,
    resolved_by  uuid REFERENCES members (id),
    CHECK ((status = 'open') = (action IS NULL))
);
-- A second open report of one target by one member returns the first: the index makes a race of two
-- the same row. The system files one open report a target.
CREATE UNIQUE INDEX reports_open_by_reporter ON reports (reporter_id, target_kind, target_id)
    WHERE status = 'open' AND reporter_id IS NOT NULL;
CREATE UNIQUE INDEX reports_open_by_system ON reports (target_kind, target_id)
    WHERE status = 'open' AND reporter_id IS NULL;
-- The queue (status, oldest first), a target's open reports (resolve, openReportsOnTarget), a
-- reporter's own list and their hourly count.
CREATE INDEX reports_queue_idx ON reports (status, id);
CREATE INDEX reports_open_target_idx ON reports (target_kind, target_id) WHERE status = 'open';
CREATE INDEX reports_reporter_idx ON reports (reporter_id, id) WHERE reporter_id IS NOT NULL;

-- Admin phrases that hold a post when it is written. `folded` is the phrase as matched (NFKC, case
-- folded), so two spellings of one term are one row.
CREATE TABLE moderation_terms (
    id          uuid PRIMARY KEY,
    phrase      text NOT NULL,
    folded      text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- One row whose version moves with every add and remove: a write reads this one value and reuses the
-- matcher it compiled for that version, on any API instance. 0 is "no terms ever"; each change sets
-- the clock in microseconds, so versions of two databases do not collide in one process's cache.
CREATE TABLE moderation_terms_version (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version   bigint NOT NULL
);
INSERT INTO moderation_terms_version (version) VALUES (0);

-- DELETE_COMMENT: a moderator's deletion keeps the row (reports, notifications and mentions refer to
-- it) and hides it from every read. The post's comment count drops with it, as for a suspended author.
ALTER TABLE comments ADD COLUMN deleted_at timestamptz;

CREATE FUNCTION comments_deleted_post_stats() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    author_status text;
BEGIN
    IF OLD.deleted_at IS NOT NULL OR NEW.deleted_at IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT status INTO author_status FROM members WHERE id = NEW.author_id FOR SHARE;
    IF author_status = 'active' THEN
        PERFORM bump_post_stats(NEW.post_id, 0, -1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER comments_deleted_post_stats AFTER UPDATE OF deleted_at ON comments
    FOR EACH ROW EXECUTE FUNCTION comments_deleted_post_stats();

-- A member's suspension or return moves only their comments still shown.
CREATE OR REPLACE FUNCTION members_post_stats() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta integer;
BEGIN
    IF (OLD.status = 'active') = (NEW.status = 'active') THEN
        RETURN NULL;
    END IF;
    delta := CASE WHEN NEW.status = 'active' THEN 1 ELSE -1 END;
    -- Rows locked in post order, so two members changing at once cannot deadlock on the posts they share.
    PERFORM 1 FROM post_stats
    WHERE post_id IN (SELECT post_id FROM comments WHERE author_id = NEW.id AND deleted_at IS NULL)
    ORDER BY post_id FOR UPDATE;
    UPDATE post_stats s SET comments = s.comments + delta * c.n
    FROM (SELECT post_id, count(*) AS n FROM comments WHERE author_id = NEW.id AND deleted_at IS NULL
          GROUP BY post_id) c
    WHERE s.post_id = c.post_id;
    RETURN NULL;
END
$$;
