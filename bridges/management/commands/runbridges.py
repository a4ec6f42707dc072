"""``python manage.py runbridges``: run every enabled bot binding in one process until stopped.

Telegram polls (or registers its webhook), Slack connects over Socket Mode (or only checks its token in HTTP
mode: events reach the web process), Discord connects to the gateway. The process looks at the bindings every
``--reload-seconds`` and starts, restarts or stops bots to match; a broken binding never stops the others.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand

from bridges.runner import Supervisor


class Command(BaseCommand):
    help = "Run every enabled Telegram, Slack and Discord binding; reload when bindings change."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--reload-seconds", type=float, default=5.0,
                            help="How often to look for added, changed or removed bindings (default 5).")
        parser.add_argument("--binding", type=int, action="append", dest="bindings",
                            help="Run only this binding id (may be repeated).")

    def handle(self, *args: Any, **options: Any) -> None:
        supervisor = Supervisor(reload_seconds=max(0.5, options["reload_seconds"]),
                                binding_ids=set(options["bindings"]) if options["bindings"] else None)

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, stop.set)
                except (NotImplementedError, RuntimeError):  # pragma: no cover - not the main thread
                    pass
            self.stdout.write("bridges: running every enabled binding (Ctrl+C to stop)")
            await supervisor.run(stop)
            self.stdout.write("bridges: stopped")

        asyncio.run(main())
