"""Failpoints for the fault suite (`faults/`): crash points and an effect log, inert unless the environment
arms them, and never armed in production mode: a process with FEEDFABRIC_PRODUCTION set and either variable
below refuses to start.

Both are read from the environment once, at import, so the hot path pays one
dict lookup (crash points) or one attribute test (the log) when disarmed:

- `FEEDFABRIC_CRASH_AT=name:n[,name:n]` makes the n-th `crash_point(name)` of
  this process SIGKILL itself, the way a host failure would (no cleanup, no
  flush): `relay-after-produce` (acks received, batch not stamped),
  `fanout-batch` (some followers pushed, the rest not), `post-before-commit`
  (rows written, transaction open).
- `FEEDFABRIC_EFFECT_LOG=dir` appends one JSON line per produce (relay) and
  per handled record (consumer runner) to `dir/<kind>-<pid>.jsonl`, with a
  wall-clock nanosecond stamp, so a checker can find lost, duplicated and
  reordered effects afterwards as Jepsen's Kafka checker does. One file per
  process and one `write` per line keep lines whole without locks.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["crash_point", "log_effect", "logging_effects"]


def _armed(raw: str) -> dict[str, int]:
    points: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, _, count = part.partition(":")
        points[name] = int(count or 1)
    return points


# As pydantic reads the FEEDFABRIC_PRODUCTION setting (feedfabric.core.settings).
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})


class ArmedInProduction(RuntimeError):
    """Failpoints kill the process on purpose: a production process must never have them armed."""


def _refuse_in_production(environ: Mapping[str, str]) -> None:
    if environ.get("FEEDFABRIC_PRODUCTION", "").strip().lower() not in _TRUE:
        return
    armed = [name for name in ("FEEDFABRIC_CRASH_AT", "FEEDFABRIC_EFFECT_LOG") if environ.get(name)]
    if armed:
        raise ArmedInProduction(f"{', '.join(armed)} set in production mode (FEEDFABRIC_PRODUCTION): refusing to start")


_refuse_in_production(os.environ)
_CRASH_AT = _armed(os.environ.get("FEEDFABRIC_CRASH_AT", ""))
_seen: dict[str, int] = {}
_LOG_DIR = os.environ.get("FEEDFABRIC_EFFECT_LOG") or None
_files: dict[str, int] = {}


def crash_point(name: str, **detail: Any) -> None:
    """SIGKILLs this process the n-th time `name` is reached, when armed (logging `detail` first)."""
    if name not in _CRASH_AT:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] == _CRASH_AT[name]:
        log_effect("crash", point=name, **detail)
        os.kill(os.getpid(), signal.SIGKILL)


def logging_effects() -> bool:
    return _LOG_DIR is not None


def log_effect(kind: str, *, at_ns: int | None = None, **fields: Any) -> None:
    """Appends one line to this process's `kind` log; nothing when the log is off.

    `at_ns`: when the effect happened, if that is not now (the line's `t`, which the checker orders by)."""
    if _LOG_DIR is None:
        return
    fd = _files.get(kind)
    if fd is None:
        os.makedirs(_LOG_DIR, exist_ok=True)
        fd = os.open(
            os.path.join(_LOG_DIR, f"{kind}-{os.getpid()}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )
        _files[kind] = fd
    line = json.dumps(
        {"t": time.time_ns() if at_ns is None else at_ns, "pid": os.getpid(), **fields},
        separators=(",", ":"),
        default=str,
    )
    os.write(fd, (line + "\n").encode())
