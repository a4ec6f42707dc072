"""A setting the settings refuse, said in one line by every program that starts the app.

``manage.py`` prints ``ImproperlyConfigured: <what to write>`` (stderr) and exits with 1. gunicorn and Celery,
started directly as compose and the image start them, buried the same line under a long traceback (gunicorn
one per worker it booted, then "Worker failed to boot"). They call in here before they load the app, and say
it as ``manage.py`` does.
"""

from __future__ import annotations

import os
import runpy
import sys

from django.core.exceptions import ImproperlyConfigured


def refusal(exc: ImproperlyConfigured) -> str:
    """The line ``manage.py`` prints for a setting the settings refused."""
    return f"ImproperlyConfigured: {exc}"


def exit_if_refused() -> None:
    """Read the settings now, in this process, and exit with the one line if they refuse (Celery: it reads
    them on its first look at its configuration, before any task or worker runs)."""
    from django.conf import settings

    if settings.configured:  # read already (a web process, a test): a refusal would have stopped it there
        return
    try:
        settings.INSTALLED_APPS  # noqa: B018 - reads the settings module
    except ImproperlyConfigured as exc:
        sys.exit(refusal(exc))


def exit_if_refused_apart() -> None:
    """gunicorn's master, reading its config before it listens or boots a worker: run the settings module in a
    namespace of its own and exit with the one line if they refuse. Nothing of this run is kept as the
    settings: each worker still reads them itself when it loads the app, as before (a reload reads them
    afresh). Imported by a process that has read them (a web worker's middleware, ``manage.py up``), it does
    nothing."""
    from django.conf import settings

    if settings.configured:
        return
    name = os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
    try:
        runpy.run_module(name, run_name="__settings_check__")
    except ImproperlyConfigured as exc:
        sys.exit(refusal(exc))
    except Exception:  # noqa: BLE001, S110 - not a setting (an embedded server that cannot start, say): the
        pass  # workers meet it again and log it with its traceback, as before
