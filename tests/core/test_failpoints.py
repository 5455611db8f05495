"""Failpoints (feedfabric.core.failpoints) cannot be armed in production mode: the process refuses to start."""

import os
import subprocess
import sys

import pytest


def _import_with(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import feedfabric.core.failpoints"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("armed", [{"FEEDFABRIC_CRASH_AT": "fanout-batch:1"}, {"FEEDFABRIC_EFFECT_LOG": "/tmp/x"}])
def test_an_armed_failpoint_stops_a_production_process(armed: dict[str, str]) -> None:
    done = _import_with({"FEEDFABRIC_PRODUCTION": "true", **armed})
    assert done.returncode != 0
    assert "ArmedInProduction" in done.stderr and "refusing to start" in done.stderr


def test_failpoints_arm_outside_production_and_production_starts_unarmed() -> None:
    assert _import_with({"FEEDFABRIC_CRASH_AT": "fanout-batch:1", "FEEDFABRIC_PRODUCTION": "false"}).returncode == 0
    assert _import_with({"FEEDFABRIC_PRODUCTION": "1"}).returncode == 0
