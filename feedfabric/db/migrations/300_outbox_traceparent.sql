-- The W3C traceparent of the transaction that wrote the row (NULL when it was
-- not traced): the relay sends it as the record's `traceparent` header, so
-- every consumer continues the trace of the change the event announces.
ALTER TABLE outbox ADD COLUMN traceparent text;
