"""`feedfabric dev` takes every child with it, whatever signal ends it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from feedfabric.core.settings import Settings
from feedfabric.ops.devstack import free_port


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_until_serving(dev: subprocess.Popen[bytes], port: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert dev.poll() is None, "feedfabric dev exited while starting"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("feedfabric dev did not start serving")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_every_child_goes_with_dev(settings: Settings, tmp_path: Path, sig: signal.Signals) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": str(settings.database_url),
        "REDIS_URL": str(settings.redis_url),
        "KAFKA_BOOTSTRAP_SERVERS": str(settings.kafka_bootstrap_servers),
        "KAFKA_TOPIC_PREFIX": settings.kafka_topic_prefix,
        "METRICS_PORT": "0",
    }
    dev = subprocess.Popen(
        [sys.executable, "-m", "feedfabric", "dev", "--port", str(port), "--data-dir", str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_serving(dev, port)
        children = psutil.Process(dev.pid).children(recursive=True)
        assert len(children) >= 2  # the relay and the worker (and whatever they start)
        dev.send_signal(sig)
        dev.wait(30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(c) for c in children):
            time.sleep(0.1)
        assert not [c.pid for c in children if _alive(c)]
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
