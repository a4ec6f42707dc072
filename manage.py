#!/usr/bin/env python
"""Django's command-line utility for LocalAI Memory."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
    if sys.argv[1:2] == ["services"]:
        # `services` reports on, starts and stops the embedded PostgreSQL and Redis itself: the settings must
        # not start them before it runs (see EMBEDDED_START in localai_memory/settings.py).
        os.environ["LOCALAI_MEMORY_EMBEDDED_START"] = "0"
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import InterfaceError, OperationalError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        if settings.configured:  # raised by a command, not by a setting: keep the traceback
            raise
        # A setting the settings refused says what to write; its traceback would only bury that line.
        sys.exit(f"ImproperlyConfigured: {exc}")
    except (OperationalError, InterfaceError) as exc:
        # A database that does not answer (stopped, a closed port) is said in one line, as a CommandError
        # would be; any other database error, or one asked for with --traceback, keeps its traceback.
        from localai_memory.core.db import database_unreachable

        said = None if "--traceback" in sys.argv else database_unreachable(exc)
        if said is None:
            raise
        sys.exit(f"CommandError: {said}")
