-- What each For You page served (16-byte post IDs, in order) after the first
-- `parent_count` posts of the page it went on from: a cursor names a page and
-- a count, so its chain's served posts are a path of these rows however long
-- the chain, and a page ranked again after Redis lost the chain leaves out
-- exactly them. `feedfabric maintain` deletes the rows of chains ranked more
-- than a day ago (foryou_pages_ranked_idx).
CREATE TABLE foryou_pages (
    id           uuid PRIMARY KEY,
    member_id    uuid NOT NULL,
    ranked_at    timestamptz NOT NULL,
    parent_id    uuid,
    parent_count integer NOT NULL,
    posts        bytea NOT NULL
);
CREATE INDEX foryou_pages_ranked_idx ON foryou_pages (ranked_at);
