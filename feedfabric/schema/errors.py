"""Every GraphQL error carries `extensions.code`; anything unexpected is masked and logged, never shown."""

from __future__ import annotations

import logging

from graphql.error import GraphQLError
from strawberry.extensions import MaskErrors

from feedfabric.errors import FeedFabricError

log = logging.getLogger("feedfabric.graphql")


class ErrorCodes(MaskErrors):
    def __init__(self) -> None:
        super().__init__(error_message="Internal server error.")

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        return [self._coded(error) for error in errors]

    def _process_result(self, result: object) -> None:
        """MaskErrors' own test is isinstance() against a runtime-checkable Protocol, which costs more
        than the rest of this hook on every result (every event of every subscriber); same test, direct."""
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = self._process_errors(errors)  # type: ignore[attr-defined]

    def _coded(self, error: GraphQLError) -> GraphQLError:
        original = error.original_error
        if isinstance(original, FeedFabricError):
            return self._with(error, original.message, original.code)
        if original is None:
            # Parse and validation errors describe the query, not the server.
            code = (error.extensions or {}).get("code") or "BAD_USER_INPUT"
            return self._with(error, error.message, str(code))
        if isinstance(original, GraphQLError) and original.original_error is None:
            return self._with(error, original.message, "BAD_USER_INPUT")
        log.error("unexpected error in %s", error.path, exc_info=original)
        return self._with(error, self.error_message, "INTERNAL_SERVER_ERROR")

    @staticmethod
    def _with(error: GraphQLError, message: str, code: str) -> GraphQLError:
        return GraphQLError(
            message=message, nodes=error.nodes, source=error.source, positions=error.positions,
            path=error.path, original_error=None, extensions={"code": code},
        )
