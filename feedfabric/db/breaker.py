"""A circuit breaker, so a dead Redis costs one timeout per cool-down instead of one per request.

On a Redis Cluster each node has its own (`shard`): one node down sends the
reads of its slots to Postgres, not everyone's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CircuitBreaker"]


@dataclass
class CircuitBreaker:
    failures_to_open: int = 3
    cool_down_s: float = 5.0
    clock: Callable[[], float] = field(default=time.monotonic)
    _failures: int = 0
    _open_until: float = 0.0
    _shards: dict[str, CircuitBreaker] = field(default_factory=dict)

    def shard(self, name: str) -> CircuitBreaker:
        """The breaker of one shard (a Redis Cluster node), with the same settings; "" is this one."""
        if not name:
            return self
        found = self._shards.get(name)
        if found is None:
            found = self._shards[name] = CircuitBreaker(self.failures_to_open, self.cool_down_s, self.clock)
        return found

    @property
    def allows(self) -> bool:
        """Closed, or open long enough that one trial request may go through."""
        return self.clock() >= self._open_until

    def succeeded(self) -> None:
        self._failures = 0
        self._open_until = 0.0

    def failed(self) -> None:
        self._failures += 1
        if self._failures >= self.failures_to_open:
            self._open_until = self.clock() + self.cool_down_s
