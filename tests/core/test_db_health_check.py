"""Kept database connections (``DATABASE_CONN_MAX_AGE`` > 0) are checked before each request's first query
without a round trip when they are idle and quiet, and still replaced when the server ended them
(``localai_memory.core.postgresql``)."""

from __future__ import annotations

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connection


@pytest.fixture
def kept_connection(monkeypatch):
    """The default connection as production keeps it between requests (60 s), opened fresh for the test."""
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    connection.ensure_connection()
    yield connection
    connection.close()


def _admin():
    info = connection.connection.info
    return psycopg.connect(host=info.host, port=info.port, dbname=info.dbname, user=info.user,
                           password=connection.settings_dict.get("PASSWORD") or None, autocommit=True)


def _next_request() -> None:
    """What Django does between two requests (``request_finished``, then ``request_started``)."""
    close_old_connections()
    close_old_connections()


@pytest.mark.django_db(transaction=True)
def test_a_healthy_kept_connection_is_reused_without_asking_the_server(kept_connection):
    pid = kept_connection.connection.info.backend_pid
    with kept_connection.cursor() as cursor:
        cursor.execute("SELECT 'the last thing this request asked'")
    _next_request()
    kept_connection.close_if_health_check_failed()  # what Django runs before the next request's first query
    with _admin() as admin:
        row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    # Django's stock check would have sent "SELECT 1": the server saw nothing since the request before.
    assert row[0] == "SELECT 'the last thing this request asked'"
    assert get_user_model().objects.count() == 0
    assert kept_connection.connection.info.backend_pid == pid  # the same connection, reused

@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_the_server_ended_is_replaced_before_the_next_request_uses_it(kept_connection):
    pid = kept_connection.connection.info.backend_pid
    with _admin() as admin:
        # with a timeout, it returns once the backend has exited (its goodbye sent), not when it was signalled
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone()[0] is True
    _next_request()
    # No error reaches the request: the check saw the server's goodbye and opened a new connection.
    assert get_user_model().objects.count() == 0
    assert kept_connection.connection.info.backend_pid != pid


@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_left_inside_a_transaction_is_checked_by_asking_the_server(kept_connection):
    kept_connection.connection.execute("BEGIN")  # bypassing Django: the state a crashed request might leave
    assert kept_connection.idle_and_quiet() is False
    kept_connection.connection.execute("ROLLBACK")
    assert kept_connection.idle_and_quiet() is True
