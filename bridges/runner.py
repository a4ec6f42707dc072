"""The bridges process: runs every enabled binding, each on its own, and follows changes to the bindings.

``Supervisor.run`` looks at the enabled bindings every ``reload_seconds`` (a fingerprint of what each
binding's connection is made of: platform, mode, credentials): a new binding is started, one whose connection
changed restarted, a disabled or deleted one stopped; a new name or agent is read by the next message. Each
binding runs as one asyncio task (``BindingTask``) that never lets an error escape: a refused token turns the
binding off with a reason (``Revoked``); any other failure is shown on the binding and retried with
exponential backoff. So one broken bot never stops the others. Blocking work (database, the model) runs in
worker threads (``runtime.run_sync``).

Told to stop, every bot gets the stop grace (``BRIDGES_STOP_GRACE_SECONDS``) to finish the turns it is
answering and send their answers, then is cut off; a bot that starts first tells the senders of the replies
its previous run left on their way (``bridges.pending``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

from django.db import DatabaseError

from . import pending, services
from .crypto import CredentialsUnreadable, decrypt
from .models import Binding
from .runtime import Revoked, backoff_seconds, run_sync
from .selectors import RunnableBinding, runnable_bindings

log = logging.getLogger(__name__)

ADAPTERS = {
    "telegram": "bridges.telegram.adapter",
    "slack": "bridges.slack.adapter",
    "discord": "bridges.discord.adapter",
}
#: The longest wait between two attempts of a failing binding.
MAX_BACKOFF_SECONDS = 300.0


def adapter(platform: str) -> ModuleType:
    """The adapter module of a platform: ``run(binding_id, credentials, mode, stop)`` and ``send_message``."""
    return importlib.import_module(ADAPTERS[platform])


def _scrub(text: str, credentials: dict[str, str]) -> str:
    for value in credentials.values():
        if value:
            text = text.replace(value, "***")
    return text


def _load(binding_id: int) -> tuple[Binding, dict[str, str]] | None:
    binding = Binding.objects.filter(pk=binding_id, enabled=True, owner__is_active=True).first()
    if binding is None:
        return None
    return binding, decrypt(binding.credentials)


#: Blocking turns (database, model) that may run at once across every bot of the process.
TURN_THREADS = 32


def stop_grace() -> float:
    """How long the bots of a process that ends may take to finish the turns they are answering and send
    their answers (``BRIDGES_STOP_GRACE_SECONDS``, 10 s by default); then the turns still waiting for the
    model are cut off (``bridges.pending`` tells their senders when the bots start again)."""
    from django.conf import settings

    return float(settings.BRIDGES_STOP_GRACE_SECONDS)


def restart_grace() -> float:
    """How long a bot restarted or switched off while the process runs may take: its turns in progress get
    the model's time-out and a little more, at least the stop grace."""
    from django.conf import settings

    return max(stop_grace(), float(settings.LLM_TIMEOUT) + 5.0)


class BindingTask:
    """One binding's bot, restarted with backoff until it is stopped or its token is refused."""

    def __init__(self, wanted: RunnableBinding) -> None:
        self.binding_id = wanted.id
        self.fingerprint = wanted.fingerprint
        self.stop_event = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name=f"binding-{wanted.id}")

    async def _run(self) -> None:
        failures = 0
        credentials: dict[str, str] = {}
        while not self.stop_event.is_set():
            try:
                loaded = await run_sync(_load, self.binding_id)
                if loaded is None:
                    return
                binding, credentials = loaded
                log.info("binding %s (%s, %s): starting", binding.pk, binding.platform, binding.mode)
                # What its previous run was answering when it stopped is told first (its runs never overlap).
                await run_sync(pending.tell_left, binding_id=binding.pk, platform=binding.platform,
                               credentials=credentials)
                await adapter(binding.platform).run(binding.pk, credentials, binding.mode, self.stop_event)
                failures = 0
                if self.stop_event.is_set():
                    return
                log.info("binding %s: the bot stopped by itself; starting it again", self.binding_id)
                continue
            except Revoked as exc:
                log.warning("binding %s: %s", self.binding_id, exc.reason)
                await run_sync(services.binding_report_revoked, binding_id=self.binding_id, code=exc.code,
                               reason=exc.reason)
                return
            except CredentialsUnreadable as exc:
                await run_sync(services.binding_report_revoked, binding_id=self.binding_id,
                               code=exc.code, reason=exc.message)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                delay = min(MAX_BACKOFF_SECONDS, backoff_seconds(failures))
                reason = _scrub(f"{type(exc).__name__}: {exc}", credentials)[:200]
                log.warning("binding %s failed (%s); retrying in %.1f s", self.binding_id, reason, delay,
                            exc_info=True)
                try:
                    await run_sync(services.binding_report_error, binding_id=self.binding_id, code="unavailable",
                                   reason=f"The bot failed ({reason}); retrying in {delay:.0f} s.")
                except DatabaseError:
                    log.exception("binding %s: could not record the failure", self.binding_id)
                try:
                    await asyncio.wait_for(self.stop_event.wait(), delay)
                    return
                except TimeoutError:
                    continue

    async def stop(self, timeout: float) -> None:
        """Let the bot finish the turns it is answering (within ``timeout``), then cut it off. Called again
        with a shorter ``timeout`` (the process ends during a restart's longer grace), the shorter wins."""
        self.stop_event.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except (TimeoutError, Exception):  # noqa: BLE001 - stopping anyway
            self.task.cancel()
            try:
                await self.task
            except BaseException:  # it was cancelled or had failed; it is gone either way
                log.debug("binding %s: stopped by cancelling", self.binding_id, exc_info=True)


class Supervisor:
    """Runs the enabled bindings (optionally only ``binding_ids``) and follows changes."""

    def __init__(self, *, reload_seconds: float = 5.0, binding_ids: set[int] | None = None) -> None:
        self.reload_seconds = reload_seconds
        self.binding_ids = binding_ids
        self.tasks: dict[int, BindingTask] = {}
        self.stopping: set[BindingTask] = set()  # restarted or switched off, finishing their turns
        self.rounds = 0  # how many times the bindings were looked at

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop``; then every bot gets the stop grace to finish its turns, also one that a restart
        was giving longer. Turns cut off may still wait for the model in a worker thread (a blocking read that
        nothing interrupts): the loop is handed an empty executor as this returns, so that ending the loop
        does not wait for them (``runbridges`` then ends the process without them)."""
        from .discord.adapter import configure_addresses, restore_addresses

        loop = asyncio.get_running_loop()
        # Every bot's turns run in the loop's default threads (runtime.run_sync): asyncio's default of
        # cpus + 4 would let a handful of slow model calls anywhere hold up every chat of every bot.
        turns = ThreadPoolExecutor(max_workers=TURN_THREADS, thread_name_prefix="bridges-turn")
        loop.set_default_executor(turns)
        previous = configure_addresses()
        stopped = asyncio.ensure_future(stop.wait())
        reconciling: asyncio.Future[None] | None = None
        try:
            while not stop.is_set():
                # A restart's grace (the model's time-out) must not hold up the end of the process.
                reconciling = asyncio.ensure_future(self.reconcile())
                await asyncio.wait({reconciling, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not reconciling.done():
                    break
                reconciling.result()
                try:
                    await asyncio.wait_for(asyncio.shield(stopped), self.reload_seconds)
                except TimeoutError:
                    pass
        finally:
            stopped.cancel()
            if reconciling is not None and not reconciling.done():
                reconciling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reconciling
            grace = stop_grace()
            everything = [*self.tasks.values(), *self.stopping]
            await asyncio.gather(*(task.stop(grace) for task in everything), return_exceptions=True)
            self.tasks.clear()
            self.stopping.clear()
            restore_addresses(previous)
            loop.set_default_executor(ThreadPoolExecutor(max_workers=1, thread_name_prefix="bridges-after"))
            turns.shutdown(wait=False, cancel_futures=True)

    async def reconcile(self) -> None:
        """Start what is wanted and not running, stop what runs and is not wanted (or changed)."""
        try:
            wanted = {b.id: b for b in await run_sync(runnable_bindings)
                      if self.binding_ids is None or b.id in self.binding_ids}
        except DatabaseError:
            log.exception("could not read the bindings; keeping the running ones")
            return
        stopping = []
        for binding_id, task in list(self.tasks.items()):
            want = wanted.get(binding_id)
            if want is None or want.fingerprint != task.fingerprint or task.task.done():
                stopping.append(task)
                del self.tasks[binding_id]
        # A bot restarted (new credentials, mode) or switched off lets the turns it is answering finish, each
        # within the model's time-out: cut off, an answer would be lost (no platform sends the message again
        # to a running process). The bots stop side by side.
        self.stopping.update(stopping)  # cancelled (the process ends), ``run`` stops them with the stop grace
        await asyncio.gather(*(task.stop(restart_grace()) for task in stopping), return_exceptions=True)
        self.stopping.difference_update(stopping)
        for binding_id, want in wanted.items():
            if binding_id not in self.tasks:
                self.tasks[binding_id] = BindingTask(want)
        self.rounds += 1

    @property
    def running(self) -> set[int]:
        return {binding_id for binding_id, task in self.tasks.items() if not task.task.done()}


class SupervisorThread:
    """A Supervisor on an event loop of its own thread (the launcher and tests use it; ``runbridges`` runs it
    in the main thread)."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="bridges", daemon=True)
        self.error: BaseException | None = None

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._started.set()
            await self.supervisor.run(self._stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported to whoever stops it
            self.error = exc
            self._started.set()

    def start(self) -> SupervisorThread:
        self._thread.start()
        self._started.wait(10)
        return self

    @property
    def alive(self) -> bool:
        """The supervisor's thread still runs (it has not finished stopping)."""
        return self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self.error is not None:
            raise self.error
