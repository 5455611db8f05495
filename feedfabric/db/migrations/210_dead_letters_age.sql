-- `feedfabric maintain` deletes dead letters by age (DEAD_LETTER_RETENTION_DAYS);
-- without this index each pass would read the whole table.
CREATE INDEX IF NOT EXISTS dead_letters_age_idx ON dead_letters (created_at);
