"""Django's PostgreSQL backend, with a health check that asks the socket before it asks the server.

With persistent connections (``DATABASE_CONN_MAX_AGE`` > 0) and ``CONN_HEALTH_CHECKS``, Django checks a kept
connection before its first use in each request by sending ``SELECT 1``: one more round trip on every
request, ~0.4 ms on a 2-core machine whose cores sat idle (bench/turn_profile). This backend looks at the
connection locally first: psycopg's state, the transaction status, and whether the server sent anything
while the connection sat idle. An idle, healthy connection has nothing to read, so it is reused with no
round trip. A server that shut down, restarted or ended the session (``pg_terminate_backend``) says so on
the socket before it closes it, and the socket turns readable: then Django's own ``SELECT 1`` decides, as
before. What a local look cannot see (a peer that vanished without closing: a cut cable) shows as the first
query's error, which the API answers with a JSON 503, and Django's end-of-request check (the full
``SELECT 1``, unchanged) closes the connection so the next request opens a new one.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLDatabaseWrapper
from psycopg import OperationalError, pq


class DatabaseWrapper(PostgreSQLDatabaseWrapper):
    # Django's own attributes, which django-stubs 5.2 does not declare: the pool (a cached property of the
    # PostgreSQL backend) and the health-check flags BaseDatabaseWrapper sets in __init__ and connect().
    pool: object | None
    health_check_enabled: bool
    health_check_done: bool

    def close_if_health_check_failed(self) -> None:
        """Django's check before a kept connection's first use in a request, made locally when it can be."""
        if self.pool or self.connection is None or not self.health_check_enabled or self.health_check_done:
            return
        if not self.idle_and_quiet() and not self.is_usable():
            self.close()
        self.health_check_done = True

    def idle_and_quiet(self) -> bool:
        """True when the connection is open, idle outside a transaction, and the server has sent nothing since
        its last answer: usable without asking. False means "ask the server" (``is_usable``), not "broken"."""
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        pgconn = connection.pgconn
        if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return False
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
            return not poller.poll(0)  # anything to read (a notice, a FATAL, the close): ask the server
        except (OSError, ValueError, OperationalError):  # no socket any more
            return False
