-- The feed log is an impression log: written a row per served post, read only in whole UTC days
-- (training, the daily statistics, retention), which its daily partitions already select. Its two
-- secondary indexes were kept up on every row and read by nothing: (served_at) duplicates the
-- partition bounds, (member_id, served_at) serves no query. Without them a COPY of a page's rows
-- costs Postgres about half as much (bench/home_feed.py's feed log figures, docs/benchmarks.md).
-- The primary key (id, served_at) stays.
DROP INDEX IF EXISTS feed_log_served_idx;
DROP INDEX IF EXISTS feed_log_member_idx;
