"""gunicorn settings of the bench: production's (``localai_memory.gunicorn_conf``) plus one hook.

``post_fork`` names the worker's PostgreSQL connections ``web-<pid>`` (libpq reads ``PGAPPNAME``), so the
fault run can see in ``pg_stat_activity`` which worker is inside a confirm and kill exactly that one. It
changes nothing else.
"""

from __future__ import annotations

import os

from localai_memory.gunicorn_conf import *  # production's settings and hooks

accesslog = None  # the bench's driver records every request itself
errorlog = "-"
loglevel = "info"


def post_fork(server, worker) -> None:  # type: ignore[no-untyped-def]
    os.environ["PGAPPNAME"] = f"web-{os.getpid()}"
