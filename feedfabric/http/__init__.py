"""The HTTP app's own parts: middleware (idempotency, refusals), health, the playground and the dashboard, the loop watchdog."""
