"""``python manage.py runbridges``: run every enabled bot binding in one process until stopped.

Telegram polls (or registers its webhook), Slack connects over Socket Mode (or only checks its token in HTTP
mode: events reach the web process), Discord connects to the gateway. The process looks at the bindings every
``--reload-seconds`` and starts, restarts or stops bots to match; a broken binding never stops the others.

SIGTERM or SIGINT stops it: the bots get ``BRIDGES_STOP_GRACE_SECONDS`` to finish the turns they are
answering and send the answers, then disconnect. A turn still waiting for the model then is cut off, and so
is any other blocking call of a bot (all run through ``runtime.run_sync``: Slack's token check or socket, when
Slack does not answer): its worker thread is blocked in a read nothing can interrupt, and Python would wait for it at exit (up to the
model's time-out), so the process ends without it (``os._exit``); its sender is told when the bot starts
again (``bridges.pending``). Should disconnecting hang, the process ends ``CLOSE_SECONDS`` after the grace
anyway.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import sys
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from bridges.runner import Supervisor, stop_grace
from bridges.runtime import blocking_calls

log = logging.getLogger(__name__)

#: How long past the grace the bots may take to disconnect before the process ends regardless.
CLOSE_SECONDS = 5.0


def _end_now(status: int) -> None:
    """End the process at once, without waiting for threads, after writing out what was logged."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing more to write anyway
            pass
    os._exit(status)


class Command(BaseCommand):
    help = "Run every enabled Telegram, Slack and Discord binding; reload when bindings change."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--reload-seconds", type=float, default=5.0,
                            help="How often to look for added, changed or removed bindings (default 5).")
        parser.add_argument("--binding", type=int, action="append", dest="bindings",
                            help="Run only this binding id (may be repeated).")

    def handle(self, *args: Any, **options: Any) -> None:
        reload_seconds = options["reload_seconds"]
        if not math.isfinite(reload_seconds) or reload_seconds < 0.5:
            raise CommandError(f"--reload-seconds {reload_seconds} is no number of seconds of at least 0.5")
        wanted = set(options["bindings"] or ())
        if wanted:
            from bridges.models import Binding

            known = set(Binding.objects.filter(pk__in=wanted).values_list("pk", flat=True))
            if wanted - known:  # it would run nothing for them, and say nothing
                raise CommandError(f"no bot has the id {', '.join(map(str, sorted(wanted - known)))} "
                                   "(the Bridges page and GET /api/bridges/bindings list them)")
        supervisor = Supervisor(reload_seconds=reload_seconds, binding_ids=wanted or None)
        grace = stop_grace()

        def overdue() -> None:
            log.error("bridges: the bots did not stop within %.0f s; ending the process", grace + CLOSE_SECONDS)
            _end_now(1)

        watchdog = threading.Timer(grace + CLOSE_SECONDS, overdue)
        watchdog.daemon = True

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()

            def on_signal() -> None:
                if not stop.is_set():
                    self.stdout.write(f"bridges: stopping (the turns in flight get {grace:.0f} s to finish)")
                    stop.set()
                    watchdog.start()

            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, on_signal)
                except (NotImplementedError, RuntimeError):  # pragma: no cover - not the main thread
                    pass
            self.stdout.write("bridges: running every enabled binding (Ctrl+C to stop)")
            await supervisor.run(stop)

        asyncio.run(main())
        watchdog.cancel()
        cut_off = blocking_calls()
        if cut_off:
            self.stdout.write(f"bridges: stopped; {cut_off} call(s) still waiting (for the model, or for a platform "
                              "that does not answer) were cut off (a cut-off turn's sender is told when the bots "
                              "start again)")
            _end_now(0)
        self.stdout.write("bridges: stopped")
