"""The shared machinery of the HTTP fakes: a threaded HTTP/1.1 server on 127.0.0.1 in a daemon thread.

A subclass implements `handle(request) -> Response` and `error_response(fault, request) -> Response`; this
module parses requests (query string, JSON, form-encoded and multipart bodies), records them, applies the
fault and latency knobs and shuts everything down, including keep-alive connections, on `stop()`.
It must never listen on anything but the loopback interface.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

#: What a `fail_next` fault may be: an HTTP status, a 200 whose body is not JSON, or no answer at all.
FaultKind = int | str

HANG_SECONDS = 30.0


@dataclass
class Request:
    """One HTTP request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # keys in lower case
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def json(self) -> Any:
        """The body decoded as JSON (None when empty or not JSON)."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def form(self) -> dict[str, str]:
        """Form fields of an url-encoded or multipart body (files as their text)."""
        if self.content_type == "application/x-www-form-urlencoded":
            return dict(parse_qsl(self.body.decode("utf-8"), keep_blank_values=True))
        if self.content_type == "multipart/form-data":
            head = f"Content-Type: {self.headers['content-type']}\r\n\r\n".encode()
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + self.body)
            fields: dict[str, str] = {}
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if name:
                    payload = part.get_payload(decode=True) or b""
                    fields[str(name)] = payload.decode("utf-8", "replace")
            return fields
        return {}

    @property
    def params(self) -> dict[str, Any]:
        """Query string merged with the body, whichever encoding the client chose."""
        merged: dict[str, Any] = dict(self.query)
        body = self.json
        if isinstance(body, dict):
            merged.update(body)
        else:
            merged.update(self.form)
        return merged


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # do not answer; hold the connection until stop() or HANG_SECONDS


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response with `Content-Type: application/json` exactly (discord.py insists on it)."""
    return Response(
        status=status,
        body=json.dumps(payload).encode("utf-8"),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


@dataclass
class Fault:
    """A failure to serve instead of a normal answer, `times` times, to requests matching `when`."""

    kind: FaultKind
    times: int = 1
    when: Callable[[Request], bool] | None = None
    options: dict[str, Any] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real services speak
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(
            method=self.command,
            path=split.path,
            query=dict(parse_qsl(split.query, keep_blank_values=True)),
            headers={key.lower(): value for key, value in self.headers.items()},
            body=body,
        )
        response = self.server.owner._respond(request)
        if response.hang:
            self.server.owner._stopping.wait(HANG_SECONDS)
            self.close_connection = True
            return
        self.send_response(response.status)
        headers = {"Content-Type": "application/json", **response.headers}
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve


class _Server(ThreadingHTTPServer):
    def get_request(self):  # type: ignore[no-untyped-def]
        # Headers and body go out in separate writes: without TCP_NODELAY a kept-alive client waits ~40 ms.
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def handle_error(self, request, client_address):  # type: ignore[no-untyped-def]
        # A client that gave up waiting (a timeout test) closed its end: not worth a traceback in the output.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    daemon_threads = True
    allow_reuse_address = True
    owner: LoopbackHTTPServer


class LoopbackHTTPServer:
    """Base class of the HTTP fakes. Use `with Fake() as fake:` or `start()` / `stop()`."""

    def __init__(self, *, latency_ms: int = 0) -> None:
        self.latency_ms = latency_ms
        self.log: list[Request] = []  # every request, in order
        self._faults: list[Fault] = []
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self) -> Self:
        self._stopping.clear()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections and join every thread this server started."""
        if self._httpd is None:
            return
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._cond:
            connections = dict(self._connections)
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in connections.values():
            thread.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not started"
        return int(self._httpd.server_address[1])

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:PORT`, without a path."""
        return f"http://127.0.0.1:{self.port}"

    # -- knobs --------------------------------------------------------------------------------------

    def fail_next(
        self,
        kind: FaultKind = 500,
        *,
        times: int = 1,
        when: Callable[[Request], bool] | None = None,
        **options: Any,
    ) -> None:
        """Answer the next `times` matching requests with a failure instead of the normal reply.

        `kind` is an HTTP status (500, 502, 429, 401, ...), "garbage" (200 with a body that is not JSON)
        or "hang" (never answer; the connection is held until the client gives up or the server stops).
        `path="..."` limits the fault to requests whose path contains it; subclasses accept more options
        (e.g. `retry_after`, `method`).
        """
        with self._cond:
            self._faults.append(Fault(kind=kind, times=times, when=when, options=options))

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0, message: str = "") -> None:
        """Block until `predicate()` holds (re-checked after every request), or raise TimeoutError."""
        with self._cond:
            if not self._cond.wait_for(predicate, timeout=timeout):
                raise TimeoutError(message or f"condition not met within {timeout} s")

    # -- for subclasses -----------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        raise NotImplementedError

    def error_response(self, fault: Fault, request: Request) -> Response:
        status = int(fault.kind)
        return json_response({"error": {"message": f"injected {status}", "code": status}}, status=status)

    def fault_matches(self, fault: Fault, request: Request) -> bool:
        """A fault applies when its `path` option (a substring) and its `when` predicate both match."""
        path = fault.options.get("path")
        if path is not None and path not in request.path:
            return False
        return fault.when is None or fault.when(request)

    def notify(self) -> None:
        """Wake `wait_for` callers after a change made outside a request."""
        with self._cond:
            self._cond.notify_all()

    # -- internals ----------------------------------------------------------------------------------

    def _track(self, sock: socket.socket) -> None:
        with self._cond:
            self._connections[sock] = threading.current_thread()

    def _untrack(self, sock: socket.socket) -> None:
        with self._cond:
            self._connections.pop(sock, None)

    def _take_fault(self, request: Request) -> Fault | None:
        with self._cond:
            for fault in self._faults:
                if self.fault_matches(fault, request):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _respond(self, request: Request) -> Response:
        with self._cond:
            self.log.append(request)
        if self.latency_ms:
            self._stopping.wait(self.latency_ms / 1000)
        fault = self._take_fault(request)
        if fault is not None:
            if fault.kind == "hang":
                response = Response(hang=True)
            elif fault.kind == "garbage":
                response = Response(
                    status=200, body=b"<html>upstream hiccup", headers={"Content-Type": "application/json"}
                )
            else:
                response = self.error_response(fault, request)
        else:
            # Handlers run one at a time under the (re-entrant) lock; a long poll releases it by waiting
            # on the condition.
            with self._cond:
                response = self.handle(request)
        with self._cond:
            self._cond.notify_all()
        return response
