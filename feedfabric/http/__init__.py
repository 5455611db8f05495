"""The HTTP app's own parts: middleware (idempotency, refusals), health, the playground and the dashboard, the loop watchdog.

A middleware that has nothing to do for a WebSocket returns the inner app's awaitable instead of
awaiting it: an awaiting frame would be kept for the socket's whole life, one per middleware.
"""
