"""What a query function runs on: a connection (inside a caller's transaction) or the pool."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg

Queryable: TypeAlias = asyncpg.Connection | asyncpg.Pool
