-- visible_posts(viewer): the posts `viewer` may see, the visibility rule as a
-- relation. It is post_visible's rule (migration 100), condition for
-- condition, written as joins so that Postgres inlines it into the query that
-- reads it: a function called once per row (post_visible) cost about 28 us a
-- row, 0.6 of the 0.8 ms of Postgres CPU it took to hydrate a 21-post
-- home-feed page; read through this relation the page costs 0.23 ms.
-- post_visible stays for the statements that decide visibility for a viewer
-- per row (realtime delivery, notifications); tests/test_visibility_forms.py
-- checks the two forms agree on every case.
--
-- Inlined only because it is LANGUAGE sql, STABLE, not STRICT, one SELECT.
CREATE FUNCTION visible_posts(viewer uuid) RETURNS SETOF posts
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT p.* FROM posts p
    JOIN members m ON m.id = p.author_id AND m.status = 'active'
    LEFT JOIN posts o ON o.id = p.repost_of
    LEFT JOIN members om ON om.id = o.author_id
    WHERE (p.status = 'live' OR (p.status = 'held' AND p.author_id = viewer))
      AND (p.repost_of IS NULL
           OR ((o.status = 'live' OR (o.status = 'held' AND o.author_id = viewer)) AND om.status = 'active'))
$$;
