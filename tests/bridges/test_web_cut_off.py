"""The web process's bots (Telegram's webhook, Slack's Events API) cut off with their process: a worker killed
in the middle of a turn (a deploy, a crash) leaves a written-down reply that Celery beat's ``tell_cut_off``
tells; a turn still running in a living worker is never told as cut off, however long it takes."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection

from bridges import core, pending, services, tasks
from bridges.models import Binding, PendingReply
from bridges.selectors import binding_credentials
from tests.api.test_two_processes import READY_WITHIN_SECONDS, free_port, test_database_url
from tests.bridges.conftest import pair
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply
from tests.support.meanwhile import meanwhile

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What should I cook tonight?"


def _wait(condition: Callable[[], bool], timeout: float, message: str) -> None:
    """A bounded wait on a condition, looked at every 50 ms."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message)
        pause.wait(0.05)


@pytest.mark.parametrize("platform", ["telegram", "slack"])
def test_a_turn_still_running_in_a_living_web_process_is_not_told_as_cut_off(platform, request, model, alice):
    bot = request.getfixturevalue(f"{platform}_bot")
    pair(bot, alice)
    seen: list[tuple[int, list[tuple[str, int | None]]]] = []

    def look() -> None:  # Celery beat's round while the model thinks
        seen.append((tasks.tell_cut_off(), list(PendingReply.objects.values_list("said", "holder"))))

    model.script(meanwhile(look, "Pasta, since you asked."))

    said = bot.dm(alice, QUESTION)

    assert said.texts == ["Pasta, since you asked."]  # answered once, and nothing else was said
    [(told, rows)] = seen
    assert told == 0
    [(written, holder)] = rows  # written down while it ran, held by this living process
    assert written == QUESTION and holder is not None
    assert not PendingReply.objects.exists()


def _presence_backend(key: int) -> int | None:
    """The PostgreSQL backend that holds the presence lock ``key``, if one does."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s "
                       "AND objsubid = 2 AND granted", [pending.PRESENCE_NAMESPACE, key])
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.mark.parametrize("platform", ["telegram", "slack"])
def test_a_web_process_whose_presence_connection_was_lost_is_not_told_as_cut_off(platform, request, model, alice):
    """PostgreSQL dropped the connection of the web process's presence (a restart, a failover, an idle cut)
    while the process had a reply on its way: a message answered after that is not told "please send it
    again" while its turn runs, and neither is the reply that was on its way before."""
    bot = request.getfixturevalue(f"{platform}_bot")
    pair(bot, alice)
    # another message of this process on its way, its turn still running
    [earlier] = pending.keep([core.InboundMessage(binding_id=bot.binding.pk, conversation_id=bot.dm_id(alice),
                                                  kind="one_to_one", sender_id="someone", sender_display="Someone",
                                                  text="Earlier question")], web=True)
    try:
        [lost] = PendingReply.objects.values_list("holder", flat=True)
        backend = _presence_backend(lost)
        assert backend is not None
        with connection.cursor() as cursor:  # waits for the backend's end: its lock is free from then on
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [backend])
        assert _presence_backend(lost) is None
        seen: list[tuple[int, list[int | None]]] = []

        def look() -> None:  # Celery beat's round while the model thinks
            seen.append((tasks.tell_cut_off(), list(PendingReply.objects.values_list("holder", flat=True))))

        model.script(meanwhile(look, "Pasta, since you asked."))

        said = bot.dm(alice, QUESTION)

        assert said.texts == ["Pasta, since you asked."]  # no "Sorry, I was restarted…" before the answer
        [(told, holders)] = seen
        assert told == 0
        # both replies moved to a new key of the process's presence, which a living connection holds
        assert len(holders) == 2 and len(set(holders)) == 1 and holders[0] != lost
        assert _presence_backend(holders[0]) is not None
        assert list(PendingReply.objects.values_list("pk", flat=True)) == [earlier]
    finally:
        PendingReply.objects.filter(pk=earlier).delete()
        pending.release(earlier)
    # nothing on its way any more: the presence's connection closed, and its backend lets the lock go as it ends
    _wait(lambda: _presence_backend(holders[0]) is None, 10, "the presence was kept while idle")


def test_a_turn_running_when_the_presence_connection_is_lost_is_not_told_as_cut_off(telegram_bot, model, alice,
                                                                                     settings):
    """The presence's connection is lost while the only turn of the process runs (the model thinks through a
    database failover) and no other message comes: Celery beat, a moment later, does not tell the sender to
    send it again; the answer comes, alone."""
    settings.LLM_TIMEOUT = 30.0  # the model thinks while the loss is looked for
    pair(telegram_bot, alice)
    seen: list[int] = []

    def lose_and_look() -> None:
        [lost] = PendingReply.objects.values_list("holder", flat=True)
        with connection.cursor() as cursor:  # waits for the backend's end: its lock is free from then on
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [_presence_backend(lost)])

        def held_anew() -> bool:
            holder = PendingReply.objects.values_list("holder", flat=True).first()
            return holder not in (None, lost) and _presence_backend(holder) is not None

        pause, deadline = threading.Event(), time.monotonic() + 5
        while not held_anew() and time.monotonic() < deadline:  # a moment for the process to notice
            pause.wait(0.05)
        seen.append(tasks.tell_cut_off())  # Celery beat's round, whatever the process did meanwhile

    model.script(meanwhile(lose_and_look, "Pasta, since you asked."))

    said = telegram_bot.dm(alice, QUESTION)

    assert said.texts == ["Pasta, since you asked."]  # no "Sorry, I was restarted…" before the answer
    assert seen == [0]
    assert not PendingReply.objects.exists()


def test_an_answer_that_could_not_be_sent_is_told_late_while_the_web_process_stays_busy(telegram_bot, telegram_server,
                                                                                         model, alice):
    """The answer could not be sent (Telegram refused the token just then) while the web process had another
    reply on its way, as a busy process always has: once the owner turns the bot back on, Celery beat's next
    round sends it late, without waiting for the process to have nothing on its way."""
    pair(telegram_bot, alice)
    # another message of this process on its way, its turn still running
    [other] = pending.keep([core.InboundMessage(binding_id=telegram_bot.binding.pk, conversation_id="5550999",
                                                kind="one_to_one", sender_id="5550999", sender_display="Someone",
                                                text="Another question")], web=True)
    try:
        model.script("Pasta, since you asked.")
        telegram_server.fail_next(401, method="sendMessage")  # the token refused as the answer goes

        said = telegram_bot.dm(alice, QUESTION)

        assert said.texts == []
        binding = Binding.objects.get(pk=telegram_bot.binding.pk)
        assert not binding.enabled  # turned off with the reason, as a refused token is
        services.binding_set_enabled(binding=binding, enabled=True)  # the owner restored the token

        assert tasks.tell_cut_off() == 1
        assert telegram_server.sent_texts(alice.number) == [pending.late_text(QUESTION), "Pasta, since you asked."]
        assert list(PendingReply.objects.values_list("pk", flat=True)) == [other]  # still on its way: not told
        assert tasks.tell_cut_off() == 0  # told once
    finally:
        PendingReply.objects.filter(pk=other).delete()
        pending.release(other)


class _DatabaseDown:
    """A loopback port that hangs up on every connection at once, as a database that is down (restarting,
    failing over) does; ``attempts`` counts the connections tried."""

    def __init__(self) -> None:
        self.port = free_port()
        self.attempts = 0
        self._listening = socket.create_server(("127.0.0.1", self.port))
        self._listening.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="database-down", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                accepted, _ = self._listening.accept()
            except TimeoutError:
                continue
            self.attempts += 1
            accepted.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listening.close()


def test_a_presence_that_cannot_be_taken_anew_is_logged_once_then_once_a_minute_and_when_it_holds_again(
        caplog, time_machine):
    """The presence's connection is lost while the database stays down (and replies are on their way): its
    watcher, trying again every moment, logs the first failure, then at most one reminder a minute while it
    lasts, not a warning a second; once the database is back and the presence holds a new key, one line says
    so."""
    caplog.set_level(logging.INFO, logger="bridges.pending")
    presence = pending.Presence()
    presence.RETRY_SECONDS = 0.02  # a try every moment: the log must not follow them
    time_machine.move_to("2026-05-04 09:00:00+00:00", tick=False)
    database = connection.settings_dict  # every thread's connections read it as they connect
    way_in = {name: database.get(name) for name in ("HOST", "PORT")}
    down = _DatabaseDown()
    lost = presence.hold()
    connection.ensure_connection()  # the test's own, open already: it stays on the database
    try:
        database.update(HOST="127.0.0.1", PORT=str(down.port))
        with connection.cursor() as cursor:  # waits for the backend's end
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [_presence_backend(lost)])

        def logged(level: int) -> list[str]:
            return [record.getMessage() for record in caplog.records
                    if record.name == "bridges.pending" and record.levelno == level]

        def tried(more: int) -> None:  # the watcher tried ``more`` times again, the clock standing still
            at = down.attempts
            _wait(lambda: down.attempts >= at + more, 30, "the watcher stopped trying")

        tried(1)
        tried(10)
        [first] = logged(logging.WARNING)
        assert first.startswith("the web process's presence could not be taken anew")
        time_machine.shift(59)
        tried(10)
        assert len(logged(logging.WARNING)) == 1  # not a warning a try
        time_machine.shift(1)
        tried(10)
        [_, reminder] = logged(logging.WARNING)  # a minute on: one reminder
        assert reminder.startswith("the web process's presence still could not be taken anew")
        time_machine.shift(30)
        tried(10)
        assert len(logged(logging.WARNING)) == 2 and not logged(logging.INFO)

        database.update(way_in)  # the database is back
        _wait(lambda: bool(logged(logging.INFO)), 30, "the presence was not taken anew")
        [back] = logged(logging.INFO)
        assert back.startswith("the web process's presence was taken anew after")
        assert presence.key != lost and _presence_backend(presence.key) is not None
        assert len(logged(logging.WARNING)) == 2
    finally:
        database.update(way_in)
        presence.drop()
        down.close()


@pytest.fixture
def web_worker(telegram_server, model, tmp_path) -> Iterator[subprocess.Popen[bytes]]:
    """A real gunicorn web process (its own session, so that it can be killed whole) on the test database."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": django_settings.REDIS_URL,
           "SECRET_KEY": django_settings.SECRET_KEY, "ALLOWED_HOSTS": "127.0.0.1",
           "TELEGRAM_API_BASE_URL": telegram_server.origin, "LLM_BASE_URL": model.url, "LLM_MODEL": "fake-model",
           "LLM_TIMEOUT": "60", "DATABASE_CONN_MAX_AGE": "0", "PYTHONUNBUFFERED": "1"}
    if django_settings.BRIDGES_SECRET_KEY:
        env["BRIDGES_SECRET_KEY"] = django_settings.BRIDGES_SECRET_KEY
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "localai_memory.wsgi:application", "--bind", f"127.0.0.1:{port}",
             "--workers", "1", "--threads", "4", "--timeout", "60"],
            cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    process.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        def answers() -> bool:
            try:
                return httpx.get(process.url + "/api/chats/memory", timeout=2).status_code == 401  # type: ignore[attr-defined]
            except httpx.TransportError:
                assert process.poll() is None, log.read_text(errors="replace")[-3000:]
                return False

        _wait(answers, READY_WITHIN_SECONDS, "the web process did not answer")
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_a_web_worker_killed_in_the_middle_of_a_turn_has_its_sender_told(telegram_bot, web_worker, telegram_server,
                                                                         model, alice):
    pair(telegram_bot, alice)
    release = threading.Event()

    def thinking(_body: dict) -> object:
        model.think_until(release, timeout=60)
        return reply("Too late.")

    model.script(thinking)
    secret = binding_credentials(binding=telegram_bot.binding)["webhook_secret"]
    update = telegram_fake.private_message(QUESTION, user_id=alice.number)

    def deliver() -> None:  # Telegram's request, which the killed worker never answers
        try:
            httpx.post(f"{web_worker.url}/bridges/telegram/{telegram_bot.binding.pk}/webhook",  # type: ignore[attr-defined]
                       json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret}, timeout=60)
        except httpx.TransportError:
            pass

    delivering = threading.Thread(target=deliver)
    delivering.start()
    try:
        _wait(lambda: bool(model.requests), 60, "the turn never reached the model")
        assert tasks.tell_cut_off() == 0  # alive: its turn runs

        os.killpg(web_worker.pid, signal.SIGKILL)  # a deploy's kill, a crash
        web_worker.wait()
        # PostgreSQL frees the worker's lock as soon as it sees its connection closed
        _wait(lambda: tasks.tell_cut_off() == 1, 30, "the killed worker's reply was not told")
    finally:
        release.set()
        delivering.join(30)

    assert telegram_server.sent_texts(alice.number) == [pending.cut_off_text(QUESTION)]
    assert not PendingReply.objects.exists()
    assert tasks.tell_cut_off() == 0  # told once


def test_celery_beat_tells_the_cut_off_replies_every_minute():
    assert django_settings.CELERY_BEAT_SCHEDULE["bridges-tell-cut-off"] == {"task": tasks.tell_cut_off.name,
                                                                            "schedule": 60.0}
