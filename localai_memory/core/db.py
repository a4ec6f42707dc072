"""Small database helpers shared by the apps' services."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.db import connections, models
from django.db.models import Q, QuerySet

from localai_memory.core.errors import InvalidInput

M = TypeVar("M", bound=models.Model)


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


@functools.cache
def _id_sequence(table: str, column: str) -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, column])
        return str(cursor.fetchone()[0])


def next_id(model: type[models.Model]) -> int:
    """An id of ``model``'s table taken from its sequence now, for a row written later with it (``pk=``)."""
    sequence = _id_sequence(model._meta.db_table, model._meta.pk.column)
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT nextval(%s)", [sequence])
        return int(cursor.fetchone()[0])


def next_id_unless(model: type[models.Model], exists: str, params: list[Any]) -> int | None:
    """``next_id``, unless the query ``exists`` (``SELECT 1 FROM … WHERE …`` with ``params``) finds a row:
    then None, and no id is taken. One round trip for both."""
    sequence = _id_sequence(model._meta.db_table, model._meta.pk.column)
    with connections["default"].cursor() as cursor:
        cursor.execute(f"SELECT CASE WHEN EXISTS ({exists}) THEN NULL ELSE nextval(%s) END", [*params, sequence])
        found = cursor.fetchone()[0]
    return None if found is None else int(found)


@contextmanager
def session_lock(namespace: int, key: int | str) -> Iterator[bool]:
    """A PostgreSQL session-level advisory lock on (``namespace``, ``key``) if no one holds it: yields whether
    it was taken, and gives it back at the end. Unlike a claim in the cache with a time-out, it dies with its
    holder: a process killed while it holds one frees it at once (its connection closes). A text key is
    hashed (``hashtext``)."""
    from django.db import connection

    sql_key = "%s" if isinstance(key, int) else "hashtext(%s)"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_lock(%s, {sql_key})", [namespace, key])
        got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT pg_advisory_unlock(%s, {sql_key})", [namespace, key])


def listed_after(rows: QuerySet[M], *, before: int | None, owned: QuerySet[M], what: str) -> QuerySet[M]:
    """``rows`` (newest first, by ``created_at`` then id) that come after the row ``before``: the next page of
    a listing read page by page (``limit``, ``before``, ``next_before``). The cursor is looked up among
    ``owned`` (all of the owner's rows, whatever else ``rows`` filters), so a row whose status changed between
    two pages still marks the place. A ``before`` that names none of them (another owner's, gone since, never
    made) is a 400 ``invalid_before``, never an empty page that would read as "no more"."""
    if before is None:
        return rows
    cursor = owned.filter(pk=before).values_list("created_at", flat=True).first()
    if cursor is None:
        raise InvalidInput(f"before={before} names none of your {what}: send the next_before of the page you "
                           "read, or leave it out to start from the newest", code="invalid_before")
    return rows.filter(Q(created_at__lt=cursor) | Q(created_at=cursor, pk__lt=before))


# --- one row by a unique key, without the queryset compiler ---------------------------------------------------

_shapes: dict[tuple[Any, ...], _Shape] = {}
_shapes_lock = threading.Lock()


def fetch_one(model: type[M], *, join: str | None = None, using: str = "default", **where: Any) -> M | None:
    """The row of ``model`` whose columns equal ``where`` (a unique key: at most one row; ``pk`` names the
    primary key), with the row its foreign key ``join`` points at already attached (a LEFT JOIN, like
    ``select_related``); ``None`` if there is none.

    What ``model.objects.select_related(join).get(**where)`` gives (``None`` instead of DoesNotExist) minus
    the queryset compiler, which costs ~0.3 ms per query on these machines, more than the round trip itself.
    Only for keys that name one row: there is no ORDER BY, a ``None`` value matches nothing (``= NULL``),
    and the join is a LEFT JOIN even for a required foreign key (the same row either way). The SELECT text is
    built once per model, join and keys; values go through the fields' own conversions both ways. Used by
    the reads every chat turn makes before anything else (the API token, the chat). Raises ``ValueError`` or
    ``TypeError`` for a value its field cannot take (an id that is not a number), as ``get`` does.
    """
    connection = connections[using]
    keys = tuple(sorted(where))
    shape = _shape(model, join, keys, connection)
    params = [field.get_db_prep_value(where[key], connection) for key, field in zip(keys, shape.keys, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(shape.sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, column, converters in shape.converters:
        for converter in converters:
            values[index] = converter(values[index], column, connection)
    own = len(shape.own)
    instance = model.from_db(using, shape.own, values[:own])
    if join is not None:
        foreign_key, related_model = _foreign_key(model, join)
        related = None
        if values[own + shape.joined_pk] is not None:
            related = related_model.from_db(using, shape.joined, values[own:])
        foreign_key.set_cached_value(instance, related)
    return instance


def _foreign_key(model: type[models.Model], name: str,
                 ) -> tuple[models.ForeignKey[Any, Any], type[models.Model]]:
    """The foreign key ``name`` of ``model`` and the model it points at (by now a class, never a name)."""
    foreign_key = cast("models.ForeignKey[Any, Any]", model._meta.get_field(name))
    return foreign_key, cast("type[models.Model]", foreign_key.related_model)


@dataclass(frozen=True)
class _Shape:
    sql: str
    keys: list[Any]  # the fields of ``where``, in key order
    own: list[str]  # attnames of the model's columns, then of the joined model's
    joined: list[str]
    joined_pk: int
    converters: list[tuple[int, Any, list[Any]]]  # (position, column, the field's from-database converters)


def _shape(model: type[models.Model], join: str | None, keys: tuple[str, ...], connection: Any) -> _Shape:
    cache_key = (model, join, keys, connection.alias)
    with _shapes_lock:
        if cache_key in _shapes:
            return _shapes[cache_key]
    quote = connection.ops.quote_name
    fields = list(model._meta.concrete_fields)
    source = f"{quote(model._meta.db_table)} m"
    joined: list[Any] = []
    if join is not None:
        foreign_key, related = _foreign_key(model, join)
        joined = list(related._meta.concrete_fields)
        source += (f" LEFT JOIN {quote(related._meta.db_table)} j "
                   f"ON j.{quote(foreign_key.target_field.column)} = m.{quote(foreign_key.column)}")
    columns = [f"m.{quote(f.column)}" for f in fields] + [f"j.{quote(f.column)}" for f in joined]
    key_fields = [model._meta.pk if key == "pk"
                  else cast("models.Field[Any, Any]", model._meta.get_field(key)) for key in keys]
    condition = " AND ".join(f"m.{quote(field.column)} = %s" for field in key_fields)
    converters = []
    for index, field in enumerate(fields + joined):
        column = field.get_col(field.model._meta.db_table)
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if found:
            converters.append((index, column, found))
    shape = _Shape(sql=f"SELECT {', '.join(columns)} FROM {source} WHERE {condition} LIMIT 1", keys=key_fields,
                   own=[f.attname for f in fields], joined=[f.attname for f in joined],
                   joined_pk=[f.primary_key for f in joined].index(True) if joined else -1,
                   converters=converters)
    with _shapes_lock:
        _shapes[cache_key] = shape
    return shape


# --- a terminal command against a database that does not answer ----------------------------------------------


def database_unreachable(exc: BaseException) -> str | None:
    """The one line ``manage.py`` says instead of ``exc``'s traceback when ``exc`` means the database does not
    answer at all (stopped, a closed port, a wrong host): where it was looked for, why, and what to do.

    None for anything else, whose traceback must stay (a bug, a lock, a statement timeout): an error raised
    while connecting counts, and one raised by a statement counts only when a new connection fails too (the
    server went away meanwhile), so a reachable database never has its errors turned into this line."""
    from django.db import InterfaceError, OperationalError

    if not isinstance(exc, (OperationalError, InterfaceError)):
        return None
    if not _raised_connecting(exc):
        probe = connections.create_connection("default")
        try:
            probe.ensure_connection()
        except (OperationalError, InterfaceError) as again:
            exc = again
        else:
            return None
        finally:
            probe.close()
    db = connections["default"].settings_dict
    host = db["HOST"] or "localhost"
    where = host if host.startswith("/") else f"{host}:{db['PORT'] or 5432}"
    if not (os.environ.get("DATABASE_URL") or os.environ.get("DATABASE_URL_FILE")):
        reason = _connect_reason(exc)
        reason = "it is not running" if reason == "no such file or directory" else reason
        return (f"the database is not reachable at {where} (the embedded PostgreSQL: {reason}); start it with "
                "`manage.py services start`")
    return (f"the database is not reachable at {where} ({_connect_reason(exc)}); check that PostgreSQL runs "
            "there and that DATABASE_URL names it")


def _raised_connecting(exc: BaseException) -> bool:
    """Whether ``exc`` came out of opening a connection (Django re-raises the driver's error with its frames)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "get_new_connection":
            return True
        tb = tb.tb_next
    return False


def _connect_reason(exc: BaseException) -> str:
    """The driver's reason in a few words: ``connection refused``, ``no such file or directory`` (no server
    has its socket there), ``password authentication failed for user "x"``, ``no answer within 10 seconds``
    (a host that drops packets, or accepts and never answers: ``DATABASE_CONNECT_TIMEOUT``)…"""
    from psycopg.conninfo import timeout_from_conninfo
    from psycopg.errors import ConnectionTimeout

    if isinstance(exc.__cause__, ConnectionTimeout) or isinstance(exc, ConnectionTimeout):
        # the seconds psycopg waited: the setting, or a URL's own, as psycopg reads it (at least 2)
        waited = timeout_from_conninfo(dict(connections["default"].settings_dict["OPTIONS"]))
        return f"no answer within {waited} seconds"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = first.rsplit("failed: ", 1)[-1].removeprefix("FATAL:").strip()
    return (reason[:1].lower() + reason[1:]) or first
