"""GraphQL documents as every transport reads them: one cached parse within the token cap, and the
spec's rule for a document of several operations.

Below both the schema (feedfabric.schema, whose ParseCache parses through here) and the WebSocket
handlers (feedfabric.realtime.sockets, which look at an operation before Strawberry runs it), so a
socket's document is parsed once between them and neither reaches into the other.
"""

from __future__ import annotations

from functools import lru_cache

from graphql import DocumentNode, OperationDefinitionNode, parse

MAX_TOKENS = 2000

UNNAMED_OF_SEVERAL = "The document has several operations: name the one to run with operationName."


@lru_cache(maxsize=256)
def parse_document(query: str) -> DocumentNode:
    """Parsed documents by text, shared by every operation of the process."""
    return parse(query, max_tokens=MAX_TOKENS)


def several_operations(document: DocumentNode) -> bool:
    """Whether the document holds more than one operation: then a request must name the one to run
    (the GraphQL spec's GetOperation), where Strawberry would run the first."""
    return sum(isinstance(d, OperationDefinitionNode) for d in document.definitions) > 1
