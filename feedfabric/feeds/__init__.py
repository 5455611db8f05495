"""The domain layer: posts, follows, favourites, reactions, moderation and the feeds read from them.

Functions here take a connection inside the caller's transaction and never
commit; the request or task boundary does (`db.pool.transaction`). A nested
`conn.transaction()` here is a savepoint inside the caller's, not a commit.

Four places are units of work of their own, and commit, each for the reason
stated where it does:

- `home.HomeFeedService._request_rebuild`: a read (the home feed) asks for a rebuild;
  reads hold no transaction to join.
- `viewer._note_seen`: resolving the viewer (on every request, reads included)
  records last-seen at most hourly; it must commit even when the request fails.
- `media.store_upload`: the original file is written before its row commits
  and removed if the commit fails, so the commit is part of the operation.
- `playlist_rebalance._run`: a background task started after the request's
  commit; it is its own task boundary.
"""
