"""Replies on their way: an answer cut off by a stopping ``runbridges`` is told, never silently lost.

The platforms take a message from the bot's process before it is answered (Telegram's next poll confirms the
update, Slack's and Discord's gateways hand it over once), so a process that stops in the middle of a turn
(a deploy past its grace, a crash, a kill) leaves a person who was never answered, and nothing would send
their message again. And the turn stores its message and the model's reply in the chat as soon as the model
has answered, before the bot sends it: cut off in between, the chat would show an answer the person never
got, and the owner and the model would take it as said.

So, in ``runbridges``, a message the bot answers is written down as it arrives (``PendingReply``), before it
waits for its turn (its chat's earlier messages, a free turn thread, Bolt's listener threads), given the answer
once the core has made it, and crossed out once that was sent. When a bot starts, whatever its
previous run left written down is cut off for good (its runs never overlap, and only runbridges writes
these): the bot sends the answer it had, late and saying so, or, when the turn had not answered yet, says
that it did not answer that message and asks for it again. The chat's log then holds what the person was
told: an answer stored and not sent is sent; a turn cut off before its answer stored nothing (a process
that ends stops waiting for the model; see ``bridges.runner``).

The web process answers Telegram's webhook and Slack's Events API, and writes its messages down the same way,
each with the key of its ``Presence``: a PostgreSQL session lock that the process holds, on a connection of its
own, while it has replies on their way. A process that ends however it ends (a deploy, a crash, a kill) closes
that connection, and PostgreSQL frees the lock at once; a process that lives, however slow its turn, keeps it.
So ``tell_cut_off`` tells exactly the rows whose process is gone, and never "please send it again" about a turn
still running in another worker. It runs in Celery beat every minute (``bridges.tasks``), not at the next
webhook request (a bot nobody writes to would never tell) nor at runbridges' start (a webhook-only setup may
not run it, and its bots never restart). Another gunicorn worker of a living process holds a presence of its
own. A lost presence connection (a database restart, a failover, a terminated session) frees the lock too,
while the process lives: the process sees it at once (``Presence``'s watcher, and each new message), takes a
new key and moves its replies to it, so their senders are not told to send again while their answers come
(only a beat round in the instant between the loss and the move, or while the database stays unreachable to
the web process and not to beat, would tell them).

A web row whose handling ended without its answer sent (the send failed; the token was refused) is let go
at once (``PendingReply.LET_GO``) and told at Celery beat's next round, not once its process has no reply on
its way any more, which a busy process may never reach before the row is a day old.

At least once: a process killed between sending and crossing out sends that answer again on its start. A
turn cut off in the instant between the model's answer being stored and being written down here is told as
unanswered, though its answer stays in the chat.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import select
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError, connections
from django.utils import timezone

from localai_memory.core.db import session_lock

from . import core, services
from .crypto import CredentialsUnreadable, decrypt
from .models import PendingReply
from .runtime import Revoked, _closing
from .selectors import replies_held, replies_left, reply_holders

log = logging.getLogger(__name__)


#: The replies this process still works on, by id: False while the message waits for its turn (its chat's
#: earlier messages, a free turn thread), True once its turn runs. A bot restarted while the process runs (new
#: credentials) is cut off past its grace, but a turn's thread goes on and writes its answer down: the bot's
#: next run leaves these for the process's next start, which sends the answer late, rather than telling the
#: person it is lost while it is still coming. A message whose turn never started is let go (``release``).
_answering: dict[int, bool] = {}
_answering_lock = threading.Lock()


class GivenUp(Exception):
    """The message was let go before its turn started (its handling was cut off): the turn must not run, the
    bot's next start tells its sender."""


def answers(inbound: core.InboundMessage | None) -> bool:
    """Whether the bot owes ``inbound`` an answer to write down: a message for the bot (a tap is not one)."""
    return inbound is not None and inbound.addressed and inbound.answer is None


#: The advisory lock namespaces of the web processes' presences ("LP") and of ``tell_cut_off`` ("LT").
PRESENCE_NAMESPACE = 0x4C50
_TELLING_NAMESPACE = 0x4C54


class Presence:
    """This web process's sign of life for the replies it has on their way: a session advisory lock on
    (``PRESENCE_NAMESPACE``, ``key``), held on a database connection of its own from its first reply on its way
    to its last one's end, so an idle process holds no connection. Made anew after a fork (gunicorn's
    workers).

    A connection PostgreSQL lost (a restart, a failover, ``pg_terminate_backend``, a NAT's idle cut) took the
    lock with it while the process still works on its replies: Celery beat would tell their senders "please
    send it again" while their answers are still coming. Nothing runs on the connection once the lock is
    taken, so nothing would notice on its own: a watcher thread waits on the connection's socket while the
    presence is held, and ``hold`` looks too; either takes a new key on a new connection as soon as the old
    one is gone, and moves the process's replies to it (``adopt`` moves the ones written with the old key
    meanwhile)."""

    #: How the presence's connection finds a peer gone silently (a NAT's idle cut, a host gone): TCP
    #: keepalives, so that its socket shows the error within about a minute and the presence takes a new key.
    KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}
    #: How long the watcher waits before it tries again to take a new key (the database is down).
    RETRY_SECONDS = 1.0
    #: How often, at most, the watcher says again that it still cannot take a new key (``_Outage``).
    REMIND_SECONDS = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: Any = None
        self._pid = 0
        self._held = 0
        self._rows: set[int] = set()
        self._watcher_pid = 0
        self._busy = threading.Event()  # set when the presence is held anew: the watcher has work
        self.key = 0

    def hold(self, count: int = 1) -> int:
        """Hold the presence for ``count`` more replies; returns its key, with which to write them down (then
        ``adopt`` them)."""
        with self._lock:
            if self._pid != os.getpid():  # a new process (a fork): nothing of the parent's is ours
                self._connection, self._held, self._rows = None, 0, set()
            self._renew()
            self._held += count
            if self._watcher_pid != os.getpid():  # threads do not survive a fork
                threading.Thread(target=self._watch, name="bridges-presence", daemon=True).start()
                self._watcher_pid = os.getpid()
            self._busy.set()
            return self.key

    def _renew(self) -> None:
        """Under the lock: a new key on a new connection if the presence has none or lost it, with the
        process's replies on their way moved to it."""
        if self._connection is not None and self._alive():
            return
        self._open()
        if self._rows:  # the replies on their way still have the lost key
            try:
                services.replies_pending_move(ids=sorted(self._rows), holder=self.key)
            except BaseException:  # the next look tries again
                self._connection.close()
                self._connection = None
                raise

    def _watch(self) -> None:
        """The watcher: while the presence is held, it waits for its connection's socket to become readable
        (PostgreSQL ended the session, or the keepalives gave up) and then takes a new key at once, not at
        the process's next message, which may come after Celery beat's next round."""
        pid = os.getpid()
        pause = threading.Event()
        outage = _Outage(self.RETRY_SECONDS, self.REMIND_SECONDS)
        while True:
            self._busy.clear()
            with self._lock:
                connection, held = self._connection, self._held
            if not held:
                self._busy.wait()
                continue
            try:
                if connection is not None and not self._gone(connection, wait=self.RETRY_SECONDS):
                    outage.over()  # held (anew by a new message, maybe)
                    continue
                with self._lock:
                    renewing = bool(self._held and self._pid == pid)
                    if renewing:
                        self._renew()
                if renewing:
                    outage.over()
            except Exception as exc:  # noqa: BLE001 - logged (``_Outage``), and tried again
                outage.failed(exc)
            finally:
                connections["default"].close()  # this thread's own, used to move the replies: not kept
            pause.wait(self.RETRY_SECONDS)  # a socket that stays readable is not looked at in a loop

    def adopt(self, ids: Sequence[int], *, key: int) -> None:
        """The replies ``ids``, written down with ``key`` (of ``hold``), are on their way: moved to the
        presence's key if its connection was lost meanwhile."""
        with self._lock:
            if self._pid != os.getpid():
                return
            self._rows.update(ids)
            if key != self.key and ids:
                try:
                    services.replies_pending_move(ids=list(ids), holder=self.key)
                except DatabaseError:  # they are written down: their turns run, and may be told as cut off
                    log.warning("replies %s keep the presence key their process lost", list(ids), exc_info=True)

    def drop(self, count: int = 1, *, ids: Sequence[int] = ()) -> None:
        """``count`` replies ended (sent, or given up; ``ids``: those written down): once none is left, the lock
        and its connection go."""
        with self._lock:
            if self._pid != os.getpid():
                return
            self._rows.difference_update(ids)
            self._held = max(0, self._held - count)
            if not self._held and self._connection is not None:
                self._connection.close()
                self._connection = None

    def _alive(self) -> bool:
        """Whether the presence's connection still holds its lock. An idle session has nothing to read: its
        socket becomes readable only when PostgreSQL ends the session (it sends why, then closes) or the
        connection failed (the keepalives gave up), and only then does a statement tell, so a living
        presence costs no round trip."""
        import psycopg

        connection = self._connection
        if not self._gone(connection, wait=0):
            return True
        try:
            connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    @staticmethod
    def _gone(connection: Any, *, wait: float) -> bool:
        """Whether ``connection`` may be gone: closed, broken, or its socket readable within ``wait`` seconds
        (an idle session has nothing to read)."""
        import psycopg

        if connection.broken or connection.closed:
            return True
        try:
            waiting = select.poll()
            waiting.register(connection.fileno(), select.POLLIN)
            return bool(waiting.poll(wait * 1000))
        except (OSError, psycopg.Error):  # closed meanwhile
            return True

    def _open(self) -> None:
        """A new connection holding a new key (the old connection, if any, is closed: lost, its lock is gone)."""
        import psycopg

        if self._connection is not None:
            connection, self._connection = self._connection, None
            try:
                connection.close()
            except psycopg.Error:
                pass
        params = {k: v for k, v in connections["default"].get_connection_params().items() if k != "cursor_factory"}
        connection = psycopg.connect(**{**self.KEEPALIVES, **params}, autocommit=True)
        try:  # the connection idles while the process's turns run: a server's idle_session_timeout must spare it
            connection.execute("SET idle_session_timeout = 0")
        except psycopg.Error:  # PostgreSQL before 14 has no such timeout
            pass
        while True:  # a key no living process holds
            key = 1 + secrets.randbelow(2**31 - 2)
            row = connection.execute("SELECT pg_try_advisory_lock(%s, %s)", [PRESENCE_NAMESPACE, key]).fetchone()
            if row and row[0]:
                break
        self._connection, self._pid, self.key = connection, os.getpid(), key


class _Outage:
    """What the presence's watcher logs while it cannot take a new key (the database is down, maybe for long),
    trying every ``retry`` seconds: the first failure at once, with its traceback; then a reminder at most every
    ``remind`` seconds while it lasts, not a warning a second; and one line once the presence holds again.
    Wall-clock time, which a test can move."""

    def __init__(self, retry: float, remind: float) -> None:
        self.retry, self.remind = retry, remind
        self.failures = 0
        self.since = self.reminded = 0.0

    def failed(self, exc: Exception) -> None:
        now = time.time()
        self.failures += 1
        if self.failures == 1:
            self.since = self.reminded = now
            log.warning("the web process's presence could not be taken anew: its replies on their way may be told "
                        "as cut off until it is; trying again every %g s", self.retry, exc_info=exc)
        elif now - self.reminded >= self.remind:
            self.reminded = now
            log.warning("the web process's presence still could not be taken anew after %s attempts in %.0f s: %s",
                        self.failures, now - self.since, exc)

    def over(self) -> None:
        """The presence holds its key (a new one, or the one a new message took meanwhile)."""
        if self.failures:
            log.info("the web process's presence was taken anew after %s failed attempts in %.0f s",
                     self.failures, time.time() - self.since)
            self.failures = 0


presence = Presence()
#: The rows of this (web) process that hold its presence, and those of them crossed out already (their answer
#: sent, or none to send): one ``release`` finds not crossed out is let go (``PendingReply.LET_GO``).
_held: set[int] = set()
_crossed_out: set[int] = set()


def keep(inbounds: Sequence[core.InboundMessage | None], *, web: bool = False) -> list[int | None]:
    """Write down the messages among ``inbounds`` the bot will answer, in one statement, as they arrive:
    before they wait for anything (their chat's earlier messages, a free turn thread; with more turns in flight
    than threads, a message may wait minutes), so a process that stops meanwhile leaves no message untold.
    ``web``: the web process's, held by its ``presence`` until ``release``. Returns the row id of each (None:
    nothing to write down). Blocking; from async code ``keep_soon``."""
    owed = [inbound for inbound in inbounds if answers(inbound) and inbound is not None]
    if not owed:
        return [None] * len(inbounds)
    holder = presence.hold(len(owed)) if web else None
    try:
        ids = iter(services.replies_pending_open(
            rows=[(inbound.binding_id, inbound.conversation_id, inbound.text) for inbound in owed], holder=holder))
    except BaseException:
        if web:
            presence.drop(len(owed))
        raise
    kept = [next(ids) if answers(inbound) else None for inbound in inbounds]
    written = [pending_id for pending_id in kept if pending_id is not None]
    with _answering_lock:
        _answering.update((pending_id, False) for pending_id in written)
        if web:
            _held.update(written)
    if web and holder is not None:
        presence.adopt(written, key=holder)
    return kept


#: The threads that write messages down as they arrive, never queued behind the turns (which may take every
#: turn thread for a minute each).
_writer = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bridges-pending")


async def keep_soon(inbounds: Sequence[core.InboundMessage | None], *, web: bool = False) -> list[int | None]:
    """``keep`` from async code, in threads of its own."""
    if not any(answers(inbound) for inbound in inbounds):
        return [None] * len(inbounds)
    return await asyncio.get_running_loop().run_in_executor(_writer, functools.partial(_closing(keep), web=web),
                                                            inbounds)


def release(pending_id: int | None) -> None:
    """The handling of a written-down message ended in this process (its reply sent, or not): if its turn never
    started (cancelled while it waited, failed before), its row is left for the bot's next start to tell; a
    web process's row no longer holds its presence, and one left (its turn never started, or its answer could
    not be sent) is let go, for Celery beat to tell at its next round: the process's presence, held as long as
    any of its replies is on its way, may never be free on a busy server. Idempotent. Blocking (from async
    code ``release_soon``) only for such a row."""
    if pending_id is None:
        return
    with _answering_lock:
        running = _answering.get(pending_id)
        if running is False:
            del _answering[pending_id]
        held = pending_id in _held
        _held.discard(pending_id)
        crossed_out = pending_id in _crossed_out
        _crossed_out.discard(pending_id)
    if held:
        presence.drop(ids=[pending_id])
        # Never a turn still running here: nothing cancels a web handling while its turn runs (the webhook
        # bots' loop cancels no update, and PTB awaits the handler; a Slack listener answers in its own thread
        # before it releases). Were one cancelled, its row would keep a key the presence no longer counts:
        # told "please send it again" while the turn runs once the process has nothing else on its way, or
        # not at all while the process stays busy. So it is not let go either (beat would tell it at once).
        if not crossed_out and not running:
            services.reply_pending_let_go(pending_id=pending_id)


async def release_soon(pending_id: int | None) -> None:
    """``release`` from async code: a row to let go is let go in a thread of its own."""
    with _answering_lock:
        letting_go = pending_id in _held and pending_id not in _crossed_out and _answering.get(pending_id) is not True
    if not letting_go:
        release(pending_id)
        return
    await asyncio.get_running_loop().run_in_executor(_writer, _closing(release), pending_id)


def _cross_out(pending_id: int) -> None:
    """The reply is handled: its answer sent, or none to send."""
    services.reply_pending_close(pending_id=pending_id)
    with _answering_lock:
        if pending_id in _held:
            _crossed_out.add(pending_id)


def answer(inbound: core.InboundMessage, *, pending_id: int | None) -> tuple[core.Reply, int | None]:
    """``core.handle`` for a message written down by ``keep`` (``pending_id``; None: nothing written down),
    whose row is given the answer after. Returns the reply and the id to ``sent`` once it was sent (None:
    nothing to cross out). GivenUp when the message was let go meanwhile. Blocking."""
    if pending_id is not None:
        with _answering_lock:
            if pending_id not in _answering:
                raise GivenUp(f"reply {pending_id} was let go before its turn")
            _answering[pending_id] = True
    kept = pending_id
    try:
        reply = core.handle(inbound)
        # the answer is written down before the row leaves _answering: a bot's next run that finds the row
        # then sends this answer late, never "please send it again" for an answer that exists
        if pending_id is not None:
            if reply.messages:
                services.reply_pending_answered(pending_id=pending_id, messages=[_data(o) for o in reply.messages])
            else:
                _cross_out(pending_id)
                kept = None
    except BaseException:
        if pending_id is not None:  # handled (the platform's retry, or the error handler, takes it from here)
            _cross_out(pending_id)
        raise
    finally:
        if pending_id is not None:
            with _answering_lock:
                _answering.pop(pending_id, None)
    return reply, kept


def sent(pending_id: int | None) -> None:
    """The reply of ``answer`` was sent (each message tried; one the platform refused is not tried again)."""
    if pending_id is not None:
        _cross_out(pending_id)


def _data(outbound: core.Outbound) -> dict[str, Any]:
    return {"text": outbound.text,
            "buttons": [[button.label, button.answer, button.proposal_id] for button in outbound.buttons],
            "formatted": outbound.formatted}


def _outbound(data: dict[str, Any]) -> core.Outbound:
    return core.Outbound(str(data.get("text") or ""),
                         tuple(core.Button(str(label), answer, int(proposal_id))
                               for label, answer, proposal_id in data.get("buttons") or ()),
                         formatted=data.get("formatted") is True)


def _named(said: str) -> str:
    return f"\u201c{said}\u201d" if said else "a message without text"


def late_text(said: str) -> str:
    return f"Sorry for the wait: I was restarted while sending my answer to {_named(said)}. Here it is."


def cut_off_text(said: str) -> str:
    return f"Sorry, I was restarted before I could answer {_named(said)}. Please send it again."


#: A reply that could not be told for this long (the person blocked the bot, the chat is gone) is dropped.
TELL_FOR = timedelta(days=1)


def tell_left(*, binding_id: int, platform: str, credentials: dict[str, str]) -> int:
    """Send what the bot's previous run (in ``runbridges``) left on its way (see the module's docstring);
    returns how many replies were told. Called as the bot starts, before it takes new messages. Revoked is
    raised (the replies wait for a new token); a reply that fails otherwise (the sends retry passing failures
    already) is logged and tried again at the bot's next start, until it is ``TELL_FOR`` old. Blocking."""
    left = []
    for pending in replies_left(binding_id=binding_id):
        with _answering_lock:
            if pending.pk not in _answering:
                left.append(pending)
    told = _tell(left, binding_id=binding_id, platform=platform, credentials=credentials)
    if told:
        log.info("binding %s: told %s replies cut off by a restart", binding_id, told)
    return told


def tell_cut_off() -> int:
    """Tell the replies whose web process is gone (its ``presence`` lock is free: the process ended) or let
    them go (``release``: their answers could not be sent), as a bot's start tells runbridges' (late answer,
    or "please send it again"); returns how many were told. A reply of a disabled bot, or of a suspended
    account, waits (and is dropped at ``TELL_FOR``); a refused token turns the binding off with its reason.
    One caller at a time across the workers. Blocking (Celery beat)."""
    with session_lock(_TELLING_NAMESPACE, 0) as mine:
        if not mine:
            return 0
        gone = []
        for holder in reply_holders():
            if holder == PendingReply.LET_GO:  # nobody works on these any more
                gone.append(holder)
                continue
            with session_lock(PRESENCE_NAMESPACE, holder) as free:
                if free:
                    gone.append(holder)
        told = 0
        by_binding: dict[int, list[PendingReply]] = {}
        for pending in replies_held(holders=gone):
            by_binding.setdefault(pending.binding_id, []).append(pending)
        for binding_id, rows in by_binding.items():
            binding = rows[0].binding
            if not binding.enabled or not binding.owner.is_active:
                _drop_old(rows)
                continue
            try:
                told += _tell(rows, binding_id=binding_id, platform=binding.platform,
                              credentials=decrypt(binding.credentials), holders=gone)
            except (Revoked, CredentialsUnreadable) as exc:
                code, reason = (exc.code, exc.reason) if isinstance(exc, Revoked) else (exc.code, exc.message)
                services.binding_report_revoked(binding_id=binding_id, code=code, reason=reason)
                _drop_old(rows)
        if told:
            log.info("told %s replies of web processes that ended", told)
        return told


def _drop_old(rows: list[PendingReply]) -> None:
    now = timezone.now()
    for pending in rows:
        if now - pending.created_at >= TELL_FOR:
            services.reply_pending_close(pending_id=pending.pk)


def _tell(rows: list[PendingReply], *, binding_id: int, platform: str, credentials: dict[str, str],
          holders: list[int] | None = None) -> int:
    """Send each reply cut off in ``rows`` (a late answer, or "please send it again") and cross it out; one
    ``TELL_FOR`` old is crossed out unsent. ``holders``: the web processes found gone; a reply another holds
    by now (its process's presence took a new key) is left alone. Revoked is raised; another failure is
    logged and the reply tried again next time. Returns how many were told."""
    from .runner import adapter

    send = adapter(platform).send_message
    told = 0
    now = timezone.now()
    for pending in rows:
        try:  # as it is now: its turn may have ended (and written its answer) while earlier rows were sent
            pending.refresh_from_db()
        except ObjectDoesNotExist:
            continue
        if holders is not None and pending.holder not in holders:
            continue
        if now - pending.created_at >= TELL_FOR:  # a bot off for long: a message this old is not worth a word
            services.reply_pending_close(pending_id=pending.pk)
            continue
        if pending.messages:
            outbounds = [core.Outbound(late_text(pending.said)), *map(_outbound, pending.messages)]
        else:
            outbounds = [core.Outbound(cut_off_text(pending.said))]
        try:
            for outbound in outbounds:
                send(binding_id=binding_id, credentials=credentials, conversation_id=pending.conversation_id,
                     outbound=outbound)
        except Revoked:
            raise
        except Exception:
            log.warning("binding %s: a reply cut off by a restart could not be sent", binding_id, exc_info=True)
            continue
        told += 1
        services.reply_pending_close(pending_id=pending.pk)
    return told
