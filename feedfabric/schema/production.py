"""Production switches: no introspection and no field suggestions when FEEDFABRIC_PRODUCTION is set.

Introspection and "Did you mean ...?" suggestions hand a hostile client the
schema, field by field; developers keep both (and GraphiQL, which the app
turns off separately). The switch is read per request from the app's
settings, so one process can host a production and a development app (tests).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from graphql.error import GraphQLError
from graphql.validation import NoSchemaIntrospectionCustomRule
from strawberry.extensions import SchemaExtension

from feedfabric.schema.refusal import app_context

_SUGGESTION = re.compile(r"\s*Did you mean [^?]*\?")


def strip_suggestions(message: str) -> str:
    return _SUGGESTION.sub("", message)


class ProductionGuards(SchemaExtension):
    def _production(self) -> bool:
        context = app_context(self.execution_context)
        return bool(context is not None and context.settings.feedfabric_production)

    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        errors = getattr(result, "errors", None)
        if errors and self._production():
            # New error objects: the validation cache may hold the originals.
            result.errors = [  # type: ignore[union-attr]
                GraphQLError(strip_suggestions(e.message), nodes=e.nodes, source=e.source, positions=e.positions,
                             path=e.path, original_error=e.original_error, extensions=e.extensions)
                for e in errors
            ]

    def on_validate(self) -> Iterator[None]:
        ec = self.execution_context
        if self._production() and NoSchemaIntrospectionCustomRule not in ec.validation_rules:
            ec.validation_rules = (*ec.validation_rules, NoSchemaIntrospectionCustomRule)
        yield
