-- The Redis run the timelines were last checked against, and the watermark of
-- that run: timeline entries at or below `floor` (a post ID) were written to
-- a Redis that has since lost data or restarted, so readers do not trust them
-- and read that part of the feed from Postgres. One row; NULL floor means
-- every entry is trusted (the first Redis this database ever used).
CREATE TABLE timeline_epoch (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    run_id      text NOT NULL,
    floor       uuid,
    settled_at  timestamptz NOT NULL DEFAULT now()
);
