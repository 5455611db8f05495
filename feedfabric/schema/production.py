"""Production switches: no introspection and no field suggestions when FEEDFABRIC_PRODUCTION is set.

Introspection and "Did you mean ...?" suggestions hand a hostile client the
schema, field by field; developers keep both (and GraphiQL, which the app
turns off separately). The switch is read per request from the app's
settings, so one process can host a production and a development app (tests).
Applied by feedfabric.schema.operation.
"""

from __future__ import annotations

import re

from graphql.error import GraphQLError
from graphql.validation import NoSchemaIntrospectionCustomRule
from strawberry.types import ExecutionContext

from feedfabric.schema.refusal import app_context

_SUGGESTION = re.compile(r"\s*Did you mean [^?]*\?")

PRODUCTION_RULES = (NoSchemaIntrospectionCustomRule,)


def strip_suggestions(message: str) -> str:
    return _SUGGESTION.sub("", message)


def is_production(execution_context: ExecutionContext) -> bool:
    context = app_context(execution_context)
    return bool(context is not None and context.settings.feedfabric_production)


def without_suggestions(errors: list[GraphQLError]) -> list[GraphQLError]:
    # New error objects: the validation cache may hold the originals.
    return [
        GraphQLError(
            strip_suggestions(e.message),
            nodes=e.nodes,
            source=e.source,
            positions=e.positions,
            path=e.path,
            original_error=e.original_error,
            extensions=e.extensions,
        )
        for e in errors
    ]
