-- For You: each member's feed profile and the rankers train-ranker fits.
CREATE TABLE feed_profiles (
    member_id       uuid PRIMARY KEY REFERENCES members (id),
    preset          text NOT NULL DEFAULT 'balanced'
                    CHECK (preset IN ('newest_first', 'balanced', 'close_circle', 'discover', 'learned')),
    sources         text[] NOT NULL,
    lookback_hours  integer NOT NULL CHECK (lookback_hours BETWEEN 1 AND 720),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- A logistic regression over the logged signals (feedfabric.feeds.ranking.SIGNALS, in `signals` order).
CREATE TABLE ranker_models (
    id             bigserial PRIMARY KEY,
    trained_at     timestamptz NOT NULL DEFAULT now(),
    training_rows  integer NOT NULL,
    auc            double precision NOT NULL,
    baseline_auc   double precision NOT NULL,
    signals        text[] NOT NULL,
    weights        double precision[] NOT NULL,
    intercept      double precision NOT NULL,
    active         boolean NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX ranker_models_one_active_idx ON ranker_models (active) WHERE active;

-- Candidate reads: a window of recent posts (POPULAR, SIMILAR), and what a member recently liked (SIMILAR).
CREATE INDEX posts_created_idx ON posts (created_at DESC);
CREATE INDEX likes_member_recent_idx ON likes (member_id, created_at DESC);
CREATE INDEX comments_author_recent_idx ON comments (author_id, created_at DESC);
