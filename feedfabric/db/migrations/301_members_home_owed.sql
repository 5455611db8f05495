-- The home feed's owed mark when Redis could not take it (docs/home-feed.md): the newest post a first
-- page Postgres served while the member's Redis timeline was out of reach. The viewer lookup every
-- request makes reads it with the member, so a later first page served from Redis, on any instance,
-- fills the range up to it; that page moves the debt into Redis and clears this column.
ALTER TABLE members ADD COLUMN home_owed uuid;
