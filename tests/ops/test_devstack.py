"""The embedded stack: services answer, and they die with their parent, even when it is killed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

SCRIPT = """
import sys, time
from pathlib import Path
from feedfabric.ops import devstack
stack = devstack.start(Path(sys.argv[1]), env={})
print(" ".join(str(s.process.pid) for s in stack.started), flush=True)
time.sleep(600)
"""


def test_services_die_with_a_parent_that_is_killed(service_dir: Path) -> None:
    # As a context manager, so its pipes are closed however the test ends.
    with subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(service_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "KAFKA_BOOTSTRAP_SERVERS")},
    ) as parent:
        assert parent.stdout is not None
        pids = [int(p) for p in parent.stdout.readline().split()]
        if not pids:
            parent.kill()
            raise AssertionError(parent.communicate()[1][-2000:])
        assert len(pids) == 3 and all(psutil.pid_exists(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
