-- Member.followers and Member.following list the most recent follow first, in
-- keyset pages on (created_at, the other member): one index range scan per
-- page, whatever the member's follower count. The older indexes keep serving
-- fan-out (follows_target_idx, by follower_id) and the follow checks (the key).
CREATE INDEX follows_target_recent_idx ON follows (target_type, target_id, created_at DESC, follower_id DESC);
CREATE INDEX follows_follower_recent_idx ON follows (follower_id, target_type, created_at DESC, target_id DESC);
