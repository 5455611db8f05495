"""The WebSocket floor: what a bare Starlette endpoint costs under the API's own uvicorn.

A Starlette app with one WebSocket route (accept, then read until the peer goes) and two HTTP routes that
send a ~700-byte text message to every open socket: one `send_text` after another, or each `send_text` in
a task of its own. It runs under uvicorn with the API's options (feedfabric.adapter.serving:
websockets-sansio, no permessage-deflate; uvloop) in a process of its own, so its CPU and memory are its
own. Three figures:

- CPU per `send_text`: SOCKETS sockets, ROUNDS rounds of one message to each; the server process's CPU
  over the rounds divided by the messages received (the clients count them);
- CPU per `send_text` in a task of its own, in rounds alternating with the first: the floor of any
  delivery where no reader holds up another. ASGI's `send` waits while a socket's transport is paused
  (uvicorn's websockets-sansio awaits its `writable` event), so sends one after another in one coroutine
  let a slow reader stall every socket behind it;
- RSS per idle connection: sockets opened and left alone (first, in the fresh process), up to each
  count of IDLE; the RSS growth over their count.

Nothing above this floor is the framework's: bench/realtime.py measures it in the same run and prints
its figures beside it.

    .venv/bin/python bench/ws_floor.py [--sockets 1000] [--rounds 20] [--idle 1000 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._wsclient import Subscriber, connect  # noqa: E402

MESSAGE = '{"id":"1","type":"next","payload":{"data":{"homeTimeline":{"cursor":"' + "x" * 640 + '"}}}}'


def app() -> object:
    """The bare app (imported by uvicorn in the floor's own process)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    open_sockets: set[WebSocket] = set()
    sending: set[asyncio.Task[None]] = set()

    async def endpoint(websocket: WebSocket) -> None:
        await websocket.accept(subprotocol="graphql-transport-ws")
        open_sockets.add(websocket)
        try:
            while True:
                await websocket.receive_text()
        except WebSocketDisconnect:
            pass
        finally:
            open_sockets.discard(websocket)

    async def blast(request: Request) -> PlainTextResponse:
        for websocket in list(open_sockets):
            await websocket.send_text(MESSAGE)
        return PlainTextResponse(str(len(open_sockets)))

    async def blast_tasks(request: Request) -> PlainTextResponse:
        for websocket in list(open_sockets):
            task = asyncio.create_task(websocket.send_text(MESSAGE))
            sending.add(task)
            task.add_done_callback(sending.discard)
        return PlainTextResponse(str(len(open_sockets)))

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            Route("/blast", blast, methods=["POST"]),
            Route("/blast-tasks", blast_tasks, methods=["POST"]),
            Route("/healthz", healthz),
            WebSocketRoute("/ws", endpoint),
        ]
    )


@dataclass
class Floor:
    sockets: int
    us_per_send: float
    us_per_task_send: float  # each send in a task of its own
    bytes_per_idle: dict[int, float]  # open idle connections -> RSS growth per connection

    def __str__(self) -> str:
        idle = ", ".join(f"{b / 1000:.1f} kB at {n:,}" for n, b in self.bytes_per_idle.items())
        return (
            f"floor (bare Starlette WebSocket, same uvicorn): {self.us_per_send:.1f} us CPU per send_text of "
            f"{len(MESSAGE)} bytes to each of {self.sockets} sockets one after another, "
            f"{self.us_per_task_send:.1f} us each in a task of its own; RSS per idle connection {idle}"
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _open(port: int, count: int, parallel: int = 200) -> list[Subscriber]:
    conns: list[Subscriber] = []
    for i in range(0, count, parallel):
        conns += await asyncio.gather(
            *(
                connect(f"ws://127.0.0.1:{port}/ws", "graphql-transport-ws", "127.0.0.1", port)
                for _ in range(min(parallel, count - i))
            )
        )
    return conns


async def _close(conns: list[Subscriber]) -> None:
    for conn in conns:
        conn.close()
    await asyncio.wait([asyncio.ensure_future(c.closed) for c in conns], timeout=30)


async def measure(sockets: int = 1000, rounds: int = 20, idle: tuple[int, ...] = (1000,)) -> Floor:
    """Runs the floor's server, measures it, stops it. Idle connections first, in a fresh process (memory
    freed by closed sockets would be reused by the next ones), growing to each count of `idle`."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", str(port)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            for _ in range(300):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            per_idle = await idle_growth(server.pid, lambda n: _open(port, n), idle)
            conns = await _open(port, sockets)
            received = [0]

            def count(raw: bytes, at: float) -> None:
                received[0] += 1

            for conn in conns:
                conn.on_message = count
            proc = psutil.Process(server.pid)
            routes = ("/blast", "/blast-tasks")
            cpu = dict.fromkeys(routes, 0.0)
            sent = dict.fromkeys(routes, 0)
            for done in range(rounds + 1):  # round 0 warms up
                for route in routes:
                    received[0] = 0
                    before = proc.cpu_times()
                    await http.post(route)
                    await _wait(received, sockets)
                    await asyncio.sleep(0.1)
                    after = proc.cpu_times()
                    if done:
                        cpu[route] += (after.user + after.system - before.user - before.system) * 1e6
                        sent[route] += received[0]
            await _close(conns)
            per_send = {route: cpu[route] / max(sent[route], 1) for route in routes}
            return Floor(sockets, per_send["/blast"], per_send["/blast-tasks"], per_idle)
    finally:
        server.terminate()
        server.wait(30)


async def idle_growth(
    pid: int, open_more: Callable[[int], Awaitable[list[Subscriber]]], counts: tuple[int, ...]
) -> dict[int, float]:
    """RSS growth per connection as idle connections are opened up to each of `counts`; closes them after."""
    await asyncio.sleep(1)
    start = rss_bytes(pid)
    held: list[Subscriber] = []
    growth: dict[int, float] = {}
    for count in sorted(counts):
        held += await open_more(count - len(held))
        await asyncio.sleep(3)
        growth[count] = (rss_bytes(pid) - start) / max(count, 1)
    await _close(held)
    await asyncio.sleep(1)
    return growth


async def _wait(received: list[int], target: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while received[0] < target and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


def serve(port: int) -> None:
    import uvicorn
    from feedfabric.adapter.serving import serve_options

    uvicorn.run(app(), host="127.0.0.1", port=port, log_level="warning", **serve_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--idle", type=int, nargs="*", default=[1000, 10_000])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    print(asyncio.run(measure(args.sockets, args.rounds, tuple(args.idle))))


if __name__ == "__main__":
    main()
