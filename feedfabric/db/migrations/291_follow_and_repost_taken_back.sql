-- Unfollowing takes back the follow notification and deleting a repost takes
-- back the repost notification, as an unlike takes back a like
-- (notifications_like_idx, migration 260): each take-back finds the actor's
-- notifications of its target in one short index range.
CREATE INDEX notifications_follow_idx ON notifications (recipient_id, actor_id) WHERE kind = 'follow';
CREATE INDEX notifications_repost_idx ON notifications (post_id, actor_id) WHERE kind = 'repost';

-- `feedfabric verify` allows timeline entries of an author the member once
-- followed (unfollows do not remove) and knew a past follow by its follow
-- notification. An unfollow now deletes that notification, so it leaves this
-- row instead, in the same transaction. Follow notifications of unfollows
-- processed before this migration were never taken back and still count.
CREATE TABLE past_follows (
    follower_id uuid NOT NULL REFERENCES members (id),
    member_id   uuid NOT NULL REFERENCES members (id),
    PRIMARY KEY (follower_id, member_id)
);
