-- The feed log's (member_id, served_at) index again (migration 351 dropped it as unread): a new
-- member's refit on each engagement reads their newest servings through it (db.reader_effects
-- .reader_cells, at most 2,000 rows), and without it that read scanned every retained day of the log
-- for every like a new member made. Kept up on every COPYed row, it costs a logged page of 20 a few
-- hundredths of a millisecond of Postgres (docs/benchmarks.md, "Feed log").
CREATE INDEX IF NOT EXISTS feed_log_member_idx ON feed_log (member_id, served_at DESC);
