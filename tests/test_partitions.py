"""The network cases' short form (the full form, all of them three runs in a row: `make faults`).

Each test starts the whole system as hosts in network namespaces (faults/hosts.py: Postgres primary and
standby, a Redis Cluster of 3 masters and 3 replicas, the broker, two API instances, relay, worker), cuts
the network between some of them, heals it, and checks with faults/checker.py and the monotonic reader.
The harness needs root, as CI has; without it the test fails with the harness's own message.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faults.partitions import CASES, Params

# One worker runs every network case when the suite runs in parallel: two harnesses choosing a free subnet
# at the same moment could choose the same one.
pytestmark = pytest.mark.xdist_group("network")

SHORT = ("2", "5")  # the Postgres failover; the relay cut from the broker and a worker cut from Redis


@pytest.mark.parametrize("name", SHORT)
async def test_network_case(name: str, service_dir: Path) -> None:
    result = await CASES[name](Params(short=True, root=service_dir))
    print(result.report())
    assert result.ok, result.report()
