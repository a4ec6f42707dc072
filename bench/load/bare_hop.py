"""A bare HTTP hop for the load bench: a WSGI app that forwards ``POST /chat/completions`` to the model server
and returns its answer, nothing else — no Django, no database, no memory.

The overhead pairs send each plain turn through it too (under gunicorn with the web app's workers, threads
and flags), so the report can say what one more HTTP server between the client and the model costs on this
machine by itself: the floor under any proxy's overhead, memory or not.

    gunicorn bench.load.bare_hop:application     # with BARE_HOP_MODEL_URL=http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from localai_memory.core import keepalive  # the app's model client (standard library only)

keepalive.tls_context()  # each gunicorn worker imports this module after the fork: build it now, not in a timed call


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != "/chat/completions":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    upstream = keepalive.post(os.environ["BARE_HOP_MODEL_URL"].rstrip("/") + "/chat/completions", body,
                              {"Accept": "application/json"}, timeout=30, connect=10)
    start_response(f"{upstream.status} {upstream.reason}",
                   [("Content-Type", upstream.headers.get("content-type", "application/json")),
                    ("Content-Length", str(len(upstream.content)))])
    return [upstream.content]
