"""What a query function runs on: a connection (inside a caller's transaction) or the pool."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg

__all__ = ["Queryable"]

Queryable: TypeAlias = asyncpg.Connection | asyncpg.Pool
