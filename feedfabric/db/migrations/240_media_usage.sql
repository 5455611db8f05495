-- Stored media bytes per member, for MEDIA_QUOTA_BYTES. A trigger keeps the
-- sum in step with media, whoever writes it: a pending upload counts its
-- original's bytes, a ready one its rebuilt file's (the original is deleted
-- then), a rejected one nothing (its original is deleted too). Uploads lock
-- the member's row here to check the quota, so two at once cannot both pass.

CREATE TABLE media_usage (
    owner_id  uuid PRIMARY KEY REFERENCES members (id),
    bytes     bigint NOT NULL DEFAULT 0
);

INSERT INTO media_usage (owner_id, bytes)
SELECT owner_id, sum(coalesce(byte_size, 0)) FROM media WHERE status <> 'rejected' GROUP BY owner_id;

CREATE FUNCTION media_usage_delta() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    before bigint := 0;
    after  bigint := 0;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status <> 'rejected' THEN
        before := coalesce(OLD.byte_size, 0);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status <> 'rejected' THEN
        after := coalesce(NEW.byte_size, 0);
    END IF;
    IF after <> before THEN
        INSERT INTO media_usage AS u (owner_id, bytes)
        VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.owner_id ELSE NEW.owner_id END, after - before)
        ON CONFLICT (owner_id) DO UPDATE SET bytes = u.bytes + EXCLUDED.bytes;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER media_usage_delta
AFTER INSERT OR DELETE OR UPDATE OF status, byte_size ON media
FOR EACH ROW EXECUTE FUNCTION media_usage_delta();
