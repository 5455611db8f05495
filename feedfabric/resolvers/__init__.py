"""Thin entry points shared by GraphQL and REST: check the viewer, parse arguments, call the domain."""
