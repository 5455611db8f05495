-- Per consumer group and event key, the highest event version the group has
-- applied. Kafka keeps a key's order only while the broker keeps its log; a
-- broker that lost data, a consumer resumed after its partitions moved, or a
-- stale committed offset can deliver a key's events late or not at all. The
-- row's lock serialises one key's events within a group, and a jump in
-- versions sends the runner to the outbox for the ones it has not seen.
CREATE TABLE consumer_key_versions (
    group_name  text NOT NULL,
    key         text NOT NULL,
    version     bigint NOT NULL,
    PRIMARY KEY (group_name, key)
);

CREATE INDEX outbox_key_version_idx ON outbox (key, aggregate_version);

-- Raised by a relay that finds the broker lost data (and republishes the
-- outbox's retention window): consumers then rewind to the start of the new
-- log, since offsets they hold or committed point into the lost one.
CREATE TABLE broker_epoch (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch      bigint NOT NULL,
    raised_at  timestamptz
);
INSERT INTO broker_epoch (epoch) VALUES (0);
