"""CPU the API spends before execution on hostile document shapes, refused and served, side by side.

    PYTHONPATH=. python -m bench.query_shape

Prints, for the doubling-fragment ladder (F<n> spreads F<n-1> twice) and for
fields repeated under one response key, the document's size, its expanded size
and merged pairs (feedfabric.schema.selections), whether it is refused, and the
process CPU of one `schema.execute` (parse, the shape check, validation, cost,
up to the first resolver). Before the shape check, F16 took about a second of
CPU and F20 about sixteen; refused documents should stay flat as n grows.
"""

from __future__ import annotations

import asyncio
import time

from feedfabric.app import schema
from feedfabric.schema.selections import expanded_size, merged_pairs
from graphql import parse


def ladder(levels: int) -> str:
    rungs = " ".join(f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels + 1))
    return f"query {{ ...F{levels} }} fragment F0 on Query {{ __typename }} {rungs}"


def repeated(times: int) -> str:
    return "{" + " __schema { queryType { name } }" * times + "}"


async def measure(name: str, query: str) -> None:
    document = parse(query)
    started = time.process_time()
    result = await schema.execute(query)
    cpu = time.process_time() - started
    refused = [e.message[:40] for e in result.errors or [] if "resolve" not in e.message]
    print(
        f"{name:14s} {len(query):5d} B  expanded {expanded_size(document):>9,d}  pairs {merged_pairs(document):>8,d}"
        f"  CPU {cpu * 1000:7.2f} ms  {refused[0] if refused else 'served'}"
    )


async def main() -> None:
    for levels in (4, 8, 9, 10, 12, 16, 20, 24):
        await measure(f"ladder F{levels}", ladder(levels))
    for times in (10, 30, 50, 100, 200, 280):
        await measure(f"repeat x{times}", repeated(times))


if __name__ == "__main__":
    asyncio.run(main())
