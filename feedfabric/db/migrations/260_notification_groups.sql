-- Grouped notifications (Mastodon's API v2 shape): LIKE, REPOST and FOLLOW
-- notifications of one target (the post; the recipient for FOLLOW) share a
-- group until the recipient reads it; COMMENT and MENTION have a group each
-- (their target is the notification itself). worker-notifications writes a
-- notification and its group in one transaction; the group row is the lock
-- that serialises concurrent writers of one group, so its counts stay exact.
CREATE TABLE notification_groups (
    id                 uuid PRIMARY KEY,
    recipient_id       uuid NOT NULL REFERENCES members (id),
    kind               text NOT NULL CHECK (kind IN ('follow', 'like', 'comment', 'mention', 'repost')),
    target_id          uuid NOT NULL,
    post_id            uuid REFERENCES posts (id),
    comment_id         uuid REFERENCES comments (id),
    actor_count        integer NOT NULL DEFAULT 0,
    notification_count integer NOT NULL DEFAULT 0,
    latest_at          timestamptz NOT NULL,
    read_at            timestamptz
);
-- One open (unread) group per kind and target: the conflict target of the writer's upsert.
CREATE UNIQUE INDEX notification_groups_open_idx
    ON notification_groups (recipient_id, kind, target_id) WHERE read_at IS NULL;
-- Keyset pages, most recently changed first.
CREATE INDEX notification_groups_recent_idx ON notification_groups (recipient_id, latest_at DESC, id DESC);

-- Distinct actors of a group, each with the time of their latest notification in it.
CREATE TABLE notification_group_actors (
    group_id  uuid NOT NULL REFERENCES notification_groups (id) ON DELETE CASCADE,
    actor_id  uuid NOT NULL REFERENCES members (id),
    latest_at timestamptz NOT NULL,
    PRIMARY KEY (group_id, actor_id)
);
CREATE INDEX notification_group_actors_recent_idx
    ON notification_group_actors (group_id, latest_at DESC, actor_id DESC);

ALTER TABLE notifications ADD COLUMN group_id uuid REFERENCES notification_groups (id);
CREATE INDEX notifications_group_idx ON notifications (group_id);
-- An unlike finds the like notification it takes back.
CREATE INDEX notifications_like_idx ON notifications (post_id, actor_id) WHERE kind = 'like';

-- Notifications written before groups existed: the unread ones of a kind and
-- target form one open group, the read ones one read group.
CREATE TEMPORARY TABLE ungrouped ON COMMIT DROP AS
SELECT n.id, n.recipient_id, n.kind, n.actor_id, n.post_id, n.comment_id, n.created_at, n.read_at,
       CASE WHEN n.kind IN ('like', 'repost') THEN n.post_id
            WHEN n.kind = 'follow' THEN n.recipient_id
            ELSE n.id END AS target_id
FROM notifications n;

CREATE TEMPORARY TABLE grouped ON COMMIT DROP AS
SELECT gen_random_uuid() AS id, recipient_id, kind, target_id, read_at IS NOT NULL AS is_read,
       (array_agg(post_id))[1] AS post_id, (array_agg(comment_id))[1] AS comment_id,
       count(DISTINCT actor_id)::int AS actor_count, count(*)::int AS notification_count,
       max(created_at) AS latest_at, max(read_at) AS read_at
FROM ungrouped
GROUP BY recipient_id, kind, target_id, read_at IS NOT NULL;

INSERT INTO notification_groups
    (id, recipient_id, kind, target_id, post_id, comment_id, actor_count, notification_count, latest_at, read_at)
SELECT id, recipient_id, kind, target_id, post_id, comment_id, actor_count, notification_count, latest_at, read_at
FROM grouped;

INSERT INTO notification_group_actors (group_id, actor_id, latest_at)
SELECT g.id, n.actor_id, max(n.created_at)
FROM ungrouped n
JOIN grouped g ON (g.recipient_id, g.kind, g.target_id, g.is_read) = (n.recipient_id, n.kind, n.target_id, n.read_at IS NOT NULL)
GROUP BY g.id, n.actor_id;

UPDATE notifications x SET group_id = g.id
FROM ungrouped n
JOIN grouped g ON (g.recipient_id, g.kind, g.target_id, g.is_read) = (n.recipient_id, n.kind, n.target_id, n.read_at IS NOT NULL)
WHERE x.id = n.id;
