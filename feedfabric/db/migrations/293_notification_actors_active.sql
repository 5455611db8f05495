-- A suspended member is hidden from other members' notification groups as everywhere else: out of the
-- sample (notification_groups.sample_actors) and out of actor_count. The count is kept at write time, as
-- post_stats keeps comments (migration 110): suspending or unsuspending a member moves the count of each
-- group they are in by one, and a take-back or a join counts only active actors
-- (feedfabric/db/notification_groups.py). Nothing is deleted: unsuspended, they count again.

CREATE INDEX notification_group_actors_actor_idx ON notification_group_actors (actor_id);

CREATE FUNCTION members_notification_actors() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta integer;
BEGIN
    IF (OLD.status = 'active') = (NEW.status = 'active') THEN
        RETURN NULL;
    END IF;
    delta := CASE WHEN NEW.status = 'active' THEN 1 ELSE -1 END;
    -- Rows locked in group order, so two members changing at once cannot deadlock on the groups they share.
    PERFORM 1 FROM notification_groups
    WHERE id IN (SELECT group_id FROM notification_group_actors WHERE actor_id = NEW.id)
    ORDER BY id FOR UPDATE;
    UPDATE notification_groups g SET actor_count = g.actor_count + delta
    FROM notification_group_actors a
    WHERE a.actor_id = NEW.id AND a.group_id = g.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER members_notification_actors AFTER UPDATE OF status ON members
    FOR EACH ROW EXECUTE FUNCTION members_notification_actors();

-- Members suspended before this migration leave the counts once.
UPDATE notification_groups g SET actor_count = g.actor_count - s.n
FROM (
    SELECT a.group_id, count(*)::int AS n
    FROM notification_group_actors a JOIN members m ON m.id = a.actor_id
    WHERE m.status <> 'active'
    GROUP BY a.group_id
) s
WHERE g.id = s.group_id;
