-- Per-reader effects: how much more (log-odds) a reader engages with an author's posts, and with a
-- tag's, than with their other posts, from a small regularised model per reader refitted with the
-- ranker from the feed log alone (feeds.reader_effects). A pair without a row has effect 0 (a new
-- reader, an author never served). The feed log keeps both as of serving, For You ranks with them.
CREATE TABLE reader_author_effects (
    member_id  uuid NOT NULL,
    author_id  uuid NOT NULL,
    effect     double precision NOT NULL,
    PRIMARY KEY (member_id, author_id)
);
CREATE TABLE reader_topic_effects (
    member_id  uuid NOT NULL,
    tag        text NOT NULL,
    effect     double precision NOT NULL,
    PRIMARY KEY (member_id, tag)
);
-- One row per refit: when, and from how many first servings.
CREATE TABLE reader_effect_fits (
    id         bigserial PRIMARY KEY,
    fitted_at  timestamptz NOT NULL DEFAULT now(),
    log_until  timestamptz NOT NULL,
    rows       bigint NOT NULL,
    authors    bigint NOT NULL,
    topics     bigint NOT NULL
);
ALTER TABLE feed_log ADD COLUMN author_effect double precision NOT NULL DEFAULT 0,
                     ADD COLUMN topic_effect double precision NOT NULL DEFAULT 0;
