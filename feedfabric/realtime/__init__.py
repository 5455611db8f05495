"""Live delivery to WebSocket subscribers: the per-process hub, the realtime consumer that feeds it,
and the streams the GraphQL subscriptions read."""
