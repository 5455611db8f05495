"""The fault suite's short form, one test per case (the full form: `make faults`).

Each case starts its own Redis, broker and `feedfabric` processes (and the
Postgres-restart case its own Postgres); only the session's Postgres server
is shared, with a fresh database per case. See faults/cases.py and README
"Reliability".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faults.cases import CASES, Params
from feedfabric.ops import devstack


@pytest.mark.parametrize("name", list(CASES))
async def test_fault_case(name: str, stack: devstack.DevStack, service_dir: Path) -> None:
    base, _, _ = stack.postgres.url.rpartition("/")
    outcome = await CASES[name](Params(short=True, root=service_dir, pg_server=f"{base}/postgres"))
    print(outcome.report())
    assert outcome.ok, outcome.report()
