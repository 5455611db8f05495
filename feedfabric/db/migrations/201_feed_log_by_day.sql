-- The feed log partitioned by UTC day, so retention drops whole days (DROP TABLE) instead of
-- deleting rows; For You rows add the preset, the candidate source and two more signals.
-- Existing rows move into their days' partitions.
ALTER TABLE feed_log RENAME TO feed_log_unpartitioned;
ALTER INDEX feed_log_member_idx RENAME TO feed_log_unpartitioned_member_idx;

CREATE TABLE feed_log (
    id          bigserial,
    member_id   uuid NOT NULL,
    feed        text NOT NULL,
    post_id     uuid NOT NULL,
    position    integer NOT NULL,
    source      text NOT NULL,
    affinity    double precision NOT NULL DEFAULT 0,
    interest    double precision NOT NULL DEFAULT 0,
    favourite   boolean NOT NULL DEFAULT false,
    age_seconds double precision NOT NULL,
    served_at   timestamptz NOT NULL DEFAULT now(),
    preset      text,
    reason      text,
    similarity  double precision NOT NULL DEFAULT 0,
    popularity  double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (id, served_at)
) PARTITION BY RANGE (served_at);
CREATE INDEX feed_log_member_idx ON feed_log (member_id, served_at DESC);
CREATE INDEX feed_log_served_idx ON feed_log (served_at);

-- Creates (if missing) the partition holding one UTC day; returns its name.
CREATE FUNCTION feed_log_partition(day date) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    name text := 'feed_log_' || to_char(day, 'YYYYMMDD');
BEGIN
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF feed_log FOR VALUES FROM (%L) TO (%L)',
                   name, (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
    RETURN name;
END
$$;

DO $$
DECLARE
    d date;
BEGIN
    FOR d IN SELECT DISTINCT (served_at AT TIME ZONE 'UTC')::date FROM feed_log_unpartitioned
             UNION SELECT generate_series((now() AT TIME ZONE 'UTC')::date - 1,
                                          (now() AT TIME ZONE 'UTC')::date + 2, interval '1 day')::date
    LOOP
        PERFORM feed_log_partition(d);
    END LOOP;
END
$$;

INSERT INTO feed_log (id, member_id, feed, post_id, position, source, affinity, interest, favourite, age_seconds, served_at)
SELECT id, member_id, feed, post_id, position, source, affinity, interest, favourite, age_seconds, served_at
FROM feed_log_unpartitioned;
SELECT setval(pg_get_serial_sequence('feed_log', 'id'), GREATEST((SELECT max(id) FROM feed_log), 1));
DROP TABLE feed_log_unpartitioned;
