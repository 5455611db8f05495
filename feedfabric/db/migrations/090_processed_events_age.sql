-- The relay prunes records of applied events by age (processed_events_retention_hours);
-- without this index each pruning pass would read the whole table.
CREATE INDEX processed_events_age_idx ON processed_events (processed_at);
