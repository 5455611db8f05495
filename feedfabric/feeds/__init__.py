"""The domain layer: posts, follows, favourites, reactions, moderation and the feeds read from them.

Functions here take a connection inside the caller's transaction and never
commit; the request or task boundary does (`db.pool.transaction`).
"""
