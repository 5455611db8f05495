-- Each embedded post's MiniLM vector (384 little-endian float32, normalised).
-- The source of truth for similarPosts; Redis keeps a copy per post. Ordered
-- by post_id, a UUIDv7, the newest rows are the primary key's tail.
CREATE TABLE post_embeddings (
    post_id     uuid PRIMARY KEY REFERENCES posts (id),
    vector      bytea NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
