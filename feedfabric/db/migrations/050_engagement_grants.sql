-- What each like gave, so its unlike takes back exactly that even when the
-- post's tags changed in between (inferred tags arrive and change later).
CREATE TABLE like_grants (
    post_id    uuid NOT NULL,
    member_id  uuid NOT NULL,
    author_id  uuid NOT NULL,
    tags       text[] NOT NULL,
    weight     double precision NOT NULL,
    PRIMARY KEY (post_id, member_id)
);
