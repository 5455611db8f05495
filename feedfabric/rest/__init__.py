"""REST routes with the same services and semantics as GraphQL."""
