"""The uvicorn options every server of the API runs with (`feedfabric api`, `dev`, the tests' servers).

permessage-deflate keeps a zlib compressor and decompressor per socket (about
half of an idle subscription's memory with it on) and deflates every event
once per subscriber; the events are small JSON, so it is off. uvicorn's
sans-I/O websockets implementation holds the least per open socket of its
WebSocket stacks.

A client's message is an operation (a document and its variables), which over
HTTP may take at most a request body's 1 MB: the same bound holds on a socket
(uvicorn's default is 16 MiB), and a bigger frame closes it with 1009.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WS_MAX_MESSAGE_BYTES", "serve_options"]

WS_MAX_MESSAGE_BYTES = 1_048_576


def serve_options() -> dict[str, Any]:
    return {"ws": "websockets-sansio", "ws_per_message_deflate": False, "ws_max_size": WS_MAX_MESSAGE_BYTES}
