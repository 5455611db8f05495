-- For You's FOLLOWING and FAVOURITES read each followed or favourite author's newest posts of the
-- look-back: one short index range per author (the author's index by ID made Postgres fetch and
-- filter every post of each author, 7.6 of the candidates statement's 87 ms on the home-feed
-- benchmark's data).
CREATE INDEX posts_author_created_idx ON posts (author_id, created_at DESC);
