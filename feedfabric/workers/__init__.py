"""The outbox relay, the consumer runner and one handler module per consumer group."""
