"""gunicorn settings of the web app: ``gunicorn -c python:localai_memory.gunicorn_conf localai_memory.wsgi``.

The command lines (``manage.py up``, the image, compose, the bench) give the address, workers and threads;
this module holds what must be the same everywhere:

- ``worker_exit``: a worker that stops (a restart, a deploy, ``max_requests``) finishes the requests it is
  answering, then runs the after-response work still queued on its thread (``core.after_response``), such
  as the chat logs of ``/v1/chat/completions`` turns already answered. gunicorn gives both together
  ``graceful_timeout`` seconds from the stop, then kills the worker; the process manager must wait a little
  longer than that before it kills gunicorn (compose: ``stop_grace_period``).
- ``worker_tmp_dir``: the workers' heartbeat file in memory where ``/dev/shm`` exists; on a disk-backed
  ``/tmp`` its ``fchmod`` can stall a worker.
"""

from __future__ import annotations

import os
from typing import Any

#: seconds a stopping worker gets, from the stop, to finish the requests it is answering (a chat turn waits
#: for the model) and then its queued after-response work (usually milliseconds)
graceful_timeout = 30
#: the longest the after-response drain waits; gunicorn's kill at ``graceful_timeout`` comes first if sooner
DRAIN_SECONDS = 10.0

if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"


def worker_exit(server: Any, worker: Any) -> None:  # gunicorn's Arbiter and Worker (gunicorn is untyped)
    from localai_memory.core.after_response import drain

    if not drain(DRAIN_SECONDS):
        server.log.warning("worker %s stopped with after-response work still queued (lost)", worker.pid)
