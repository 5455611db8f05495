"""FeedFabric: a social-feed backend over Postgres, Redis timelines and Kafka."""

__version__ = "0.1.0"
