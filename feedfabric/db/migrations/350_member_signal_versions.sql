-- A version per member of what the feed log reads about them (author affinity, topic interest,
-- favourites, whether they commented, their exposure counts), so an API process can keep each
-- member's signals in memory and reload them only when they changed (feeds.served_signals). Each
-- change bumps it: the triggers below for the engagement, favourite and comment writes; the feed
-- log's own exposure fold bumps it in the statement that adds the counts (db.feed_log.fold_exposure),
-- and tells its writer the new version. The per-reader effects change only with a refit, which the
-- writer sees from reader_effect_fits. A member without a row is at version 0.
CREATE TABLE member_signal_versions (
    member_id  uuid PRIMARY KEY,
    version    bigint NOT NULL
);

-- TG_ARGV[0]: the column naming the member whose signals the row is part of.
CREATE FUNCTION bump_member_signal_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    member uuid := (to_jsonb(COALESCE(NEW, OLD)) ->> TG_ARGV[0])::uuid;
BEGIN
    INSERT INTO member_signal_versions AS v (member_id, version) VALUES (member, 1)
    ON CONFLICT (member_id) DO UPDATE SET version = v.version + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER author_affinity_signal_version AFTER INSERT OR UPDATE OR DELETE ON author_affinity
    FOR EACH ROW EXECUTE FUNCTION bump_member_signal_version('member_id');
CREATE TRIGGER topic_interest_signal_version AFTER INSERT OR UPDATE OR DELETE ON topic_interest
    FOR EACH ROW EXECUTE FUNCTION bump_member_signal_version('member_id');
CREATE TRIGGER favourites_signal_version AFTER INSERT OR UPDATE OR DELETE ON favourites
    FOR EACH ROW EXECUTE FUNCTION bump_member_signal_version('member_id');
CREATE TRIGGER comments_signal_version AFTER INSERT OR DELETE ON comments
    FOR EACH ROW EXECUTE FUNCTION bump_member_signal_version('author_id');
