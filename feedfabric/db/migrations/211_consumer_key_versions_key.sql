-- Retention forgets a key's applied versions in every group at once (feedfabric.maintenance, and the
-- relay's outbox prune): by key alone, which the (group_name, key) primary key cannot look up. Updates of
-- `version` leave this index alone (heap-only updates still apply).
CREATE INDEX IF NOT EXISTS consumer_key_versions_key_idx ON consumer_key_versions (key);
