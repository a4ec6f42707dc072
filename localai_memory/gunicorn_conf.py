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
- ``limit_request_line``: gunicorn's longest, 8190 bytes, not its default 4094. A search of 500 characters
  (the most ``q`` takes) in Chinese or Japanese is ~4.5 KB once percent-encoded, in emoji ~6 KB: those reach
  the app, which answers every parameter too long for it with its own JSON 400. Only a request line past
  8190 bytes still gets gunicorn's own HTML 414: it never reaches the app.
- ``accesslog`` / ``access_log_format``: one line per request on stdout (the time, the client's address, the
  method, the route, the status, the bytes sent, how long it took), as the launcher and compose both run it.
  The route is the URL pattern the request matched (``/api/chats/memory/notes``, ``/agents/<int:agent_id>/``),
  named by ``core.middleware.AccessLogRouteMiddleware``, never the address the client sent: that holds note
  text and names (``/api/chats/memory/search?q=…``, ``?topic=…``, ``/files/open/?path=Memory/….md``), which are
  not logged. No referrer either (a page's address, with its query) and no user agent.
- ``control_socket_disable``: no control socket. gunicorn 27 opens one at ``~/.gunicorn/gunicorn.ctl`` by
  default, one path for every gunicorn of the user: two apps (or two ``manage.py up``) on one host shared
  it, and the first to stop deleted the other's. Nothing here uses it.
- The settings are read once as gunicorn reads this config, before it listens: one it refuses stops it with
  the one line ``manage.py`` prints (``core.startup``), exit status 1, where each worker it booted logged a
  traceback and gunicorn then stopped with "Worker failed to boot".
"""

from __future__ import annotations

import os
from typing import Any

from localai_memory.core.startup import exit_if_refused_apart

exit_if_refused_apart()

#: seconds a stopping worker gets, from the stop, to finish the requests it is answering (a chat turn waits
#: for the model) and then its queued after-response work (usually milliseconds)
graceful_timeout = 30
#: the longest the after-response drain waits; gunicorn's kill at ``graceful_timeout`` comes first if sooner
DRAIN_SECONDS = 10.0

#: bytes of the request line (method, path, query string); 8190 is the most gunicorn takes
limit_request_line = 8190

#: no ``~/.gunicorn/gunicorn.ctl``, which every gunicorn of the user shares by default (see above)
control_socket_disable = True

#: the WSGI environ key under which the app names the route a request took (read by ``access_log_format``)
ACCESS_LOG_ROUTE = "localai_memory.route"
accesslog = "-"
access_log_format = '%(t)s %(h)s "%(m)s %({' + ACCESS_LOG_ROUTE + '}e)s %(H)s" %(s)s %(b)s %(M)sms'

if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"


def worker_exit(server: Any, worker: Any) -> None:  # gunicorn's Arbiter and Worker (gunicorn is untyped)
    from localai_memory.core.after_response import drain

    if not drain(DRAIN_SECONDS):
        server.log.warning("worker %s stopped with after-response work still queued (lost)", worker.pid)
