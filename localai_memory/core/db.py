"""Small database helpers shared by the apps' services."""

from __future__ import annotations

from typing import Any


def unflushed_commit_cte(connection: Any) -> str:
    """A ``settings`` CTE for one statement that records bookkeeping (a chat message, a token's last use).

    Outside a transaction the statement is its own transaction, and the CTE turns ``synchronous_commit``
    off for it alone: it commits without waiting for PostgreSQL to flush its write-ahead log, so a crash of
    the database server a fraction of a second later may lose it, never half-write it. Inside a caller's
    transaction the caller's other writes decide how it commits, so the CTE changes nothing. The statement
    must read ``settings`` (``FROM settings`` or ``EXISTS (SELECT 1 FROM settings)``), or PostgreSQL skips
    the CTE. Notes, change sets and proposals never use it.
    """
    if connection.in_atomic_block:
        return "settings AS (SELECT 1)"
    return "settings AS (SELECT set_config('synchronous_commit', 'off', true))"
