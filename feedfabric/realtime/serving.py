"""The uvicorn options every server of the API runs with (`feedfabric api`, `dev`, the tests' servers).

permessage-deflate keeps a zlib compressor and decompressor per socket (about
half of an idle subscription's memory with it on) and deflates every event
once per subscriber; the events are small JSON, so it is off. uvicorn's
sans-I/O websockets implementation holds the least per open socket of its
WebSocket stacks.
"""

from __future__ import annotations

from typing import Any


def serve_options() -> dict[str, Any]:
    return {"ws": "websockets-sansio", "ws_per_message_deflate": False}
