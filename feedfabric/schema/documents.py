"""GraphQL documents as every transport reads them: one cached parse within the token cap, and the
spec's rule for a document of several operations.

Shared by the schema (feedfabric.schema, whose ParseCache parses through here) and the WebSocket
handlers (feedfabric.adapter.websocket, which look at an operation before the schema runs it), so a
socket's document is parsed once between them and neither reaches into the other.
"""

from __future__ import annotations

from functools import lru_cache

from graphql import DocumentNode, GraphQLError, OperationDefinitionNode, parse

__all__ = ["MAX_DOCUMENT_CHARS", "UNNAMED_OF_SEVERAL", "parse_document", "several_operations", "too_long"]

MAX_TOKENS = 2000
# Comments and whitespace are no tokens, yet the lexer walks every character of them (0.3 s for a
# megabyte of comment) and the parse cache keeps the whole text: the token cap alone bounds neither.
# Ten characters a token, as the persisted-query store allows (feedfabric.schema.persisted).
MAX_DOCUMENT_CHARS = 20_000
TOO_LONG = (
    f"The document is longer than {MAX_DOCUMENT_CHARS:,} characters (comments and indentation count); "
    "send a shorter one."
)

UNNAMED_OF_SEVERAL = "The document has several operations: name the one to run with operationName."


def too_long(query: str) -> GraphQLError | None:
    """The refusal of a document past MAX_DOCUMENT_CHARS, checked by each transport before anything
    parses it (Strawberry would parse one this hook refused)."""
    if len(query) <= MAX_DOCUMENT_CHARS:
        return None
    return GraphQLError(TOO_LONG, extensions={"code": "BAD_USER_INPUT"})


@lru_cache(maxsize=256)
def parse_document(query: str) -> DocumentNode:
    """Parsed documents by text, shared by every operation of the process; never one too long to keep."""
    if (refusal := too_long(query)) is not None:
        raise refusal
    return parse(query, max_tokens=MAX_TOKENS)


def several_operations(document: DocumentNode) -> bool:
    """Whether the document holds more than one operation: then a request must name the one to run
    (the GraphQL spec's GetOperation), where Strawberry would run the first."""
    return sum(isinstance(d, OperationDefinitionNode) for d in document.definitions) > 1
