"""Recall's own binary query meets a database server that went away the way every other query does."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, connection

from localai_memory.notes.paths import Scope
from localai_memory.recall.service import owner_notes


@pytest.mark.django_db(transaction=True)
def test_a_lost_database_connection_in_recall_is_a_django_operational_error(owner):
    connection.ensure_connection()
    info = connection.connection.info
    pid = info.backend_pid
    with psycopg.connect(host=info.host, port=info.port, dbname=info.dbname, user=info.user,
                         password=connection.settings_dict.get("PASSWORD") or None, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    try:
        # The API's middleware answers django.db's OperationalError with a JSON 503 and Retry-After; a raw
        # psycopg error here would have been a 500.
        with pytest.raises(OperationalError):
            owner_notes(owner_id=owner.pk, scopes=[Scope.user()])
    finally:
        connection.close()
