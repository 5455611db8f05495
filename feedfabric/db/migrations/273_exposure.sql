-- How often each member was served each author and each tag (the feed log's insert counts them),
-- so engagement can be read as a rate: author_affinity (or topic_interest) per post served from that
-- author (or tag). A running total of likes says as much about how often an author was shown as about
-- how much the reader likes them; the rate separates the two. The feed log keeps both rates as of
-- serving, For You ranks with them.
CREATE TABLE author_exposure (
    member_id  uuid NOT NULL,
    author_id  uuid NOT NULL,
    served     bigint NOT NULL,
    PRIMARY KEY (member_id, author_id)
);
CREATE TABLE topic_exposure (
    member_id  uuid NOT NULL,
    tag        text NOT NULL,
    served     bigint NOT NULL,
    PRIMARY KEY (member_id, tag)
);
ALTER TABLE feed_log ADD COLUMN affinity_rate double precision NOT NULL DEFAULT 0,
                     ADD COLUMN interest_rate double precision NOT NULL DEFAULT 0;
