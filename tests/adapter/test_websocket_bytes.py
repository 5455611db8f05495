"""A socket's unsent bytes are bounded: an answer too large for a reader that does not read closes it."""

from __future__ import annotations

import pytest
from feedfabric.core.settings import Settings

from tests.realtime_support import PROTOCOLS, StalledClient, aliased_pages, serve

BIG_ANSWER = aliased_pages(3)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_answer_past_the_unsent_bound_closes_a_reader_that_does_not_read(
    settings: Settings, protocol: str
) -> None:
    """The issue's attack, scaled down: aliased pages of long posts to a reader with a 4 kB receive
    buffer. The answer (about 150 kB) is never parked: the socket is closed with 1013 at once."""
    settings = settings.model_copy(update={"ws_max_unsent_bytes": 65_536})
    async with serve(settings) as server:
        token = await server.api.member("hoarder")
        for n in range(10):
            await server.api.post(token, f"{n} " + "x" * 4_900)
        reader = await StalledClient.open(server, protocol, token)
        try:
            kind = "subscribe" if protocol == "graphql-transport-ws" else "start"
            await reader.send({"id": "1", "type": kind, "payload": {"query": BIG_ANSWER}})
            code, reason = await reader.drain_until_closed(timeout=20)
        finally:
            reader.close()
        assert code == 1013, (code, reason)
        assert "bytes unsent" in reason
        assert reader.received == 0  # the answer was never written
        small = await server.api.raw("{ viewer { id } }", token=token)
        assert small.get("data"), small
