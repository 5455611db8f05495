"""A real uvicorn serving the app on a loopback port, in a thread, for tests that need real sockets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from feedfabric.adapter.serving import serve_options
from feedfabric.app import create_app
from feedfabric.core.settings import Settings
from feedfabric.ops.devstack import free_port


@contextmanager
def live_server(settings: Settings) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:PORT) while the server runs; stops it on exit."""
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on", **serve_options()
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
