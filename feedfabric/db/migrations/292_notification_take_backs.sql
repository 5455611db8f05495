-- A take-back (unlike, unfollow, deleted repost) leaves a row here, so the
-- same actor's redo of the same kind on the same target within a day is
-- written and grouped but not announced again (notification_groups.quiet),
-- when the recipient was told of it: `announced` says that a taken-back
-- notification had lived long enough for its live push to go out.
-- `feedfabric maintain` deletes rows past the day (take_backs_taken_idx).
CREATE TABLE notification_take_backs (
    recipient_id uuid NOT NULL,
    kind         text NOT NULL,
    actor_id     uuid NOT NULL,
    target_id    uuid NOT NULL,
    taken_at     timestamptz NOT NULL DEFAULT now(),
    announced    boolean NOT NULL,
    PRIMARY KEY (recipient_id, kind, actor_id, target_id)
);
CREATE INDEX take_backs_taken_idx ON notification_take_backs (taken_at);

-- A group its take-backs emptied stays (out of every list, so a redo joins it
-- again under its key); `feedfabric maintain` deletes it after a day.
CREATE INDEX notification_groups_empty_idx ON notification_groups (latest_at) WHERE notification_count = 0;
