"""A small keep-alive HTTP/1.1 client on the standard library's ``http.client``, for the model call.

The model call sits in front of every chat reply, so its client's own cost is part of what memory adds to a
turn. httpx, which the app used before, spends ~0.9 ms of CPU per POST on loopback; ``http.client`` with a kept
connection ~0.4 ms (``bench/README.md``). This module adds what the app needs around it and nothing else:

- **Kept connections**, one pool per process (a forked worker starts with an empty one) and per origin, used
  last-in first-out so the warmest one answers. A connection idle longer than ``IDLE_SECONDS``, or one the
  server has closed (its socket reads as ready while idle), is dropped before use.
- **One retry, on a kept connection only**, when the server closed it while the request was on its way (reset,
  broken pipe, or an empty answer). That is the race every keep-alive client has, not a server failure; a new
  connection that fails is reported.
- **Timeouts** like httpx's: ``connect`` for the TCP (and TLS) setup, ``timeout`` for each read and write.
- **TLS** checked against ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when set, else certifi's bundle (what httpx
  used), else the system's.
- **Proxies** from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), as httpx
  honoured them: an ``http://`` URL is sent to the proxy whole, an ``https://`` one through a ``CONNECT``
  tunnel. Only ``http://`` proxies: another kind (``socks5://``, ``https://``) is a clear connect error.

Failures raise ``ConnectError`` (nothing was sent: refused, no route, TLS refused), ``TimeoutError`` or
``OSError`` (``http.client.HTTPException`` for a reply that is not HTTP). The caller turns them into its error.
"""

from __future__ import annotations

import base64
import http.client
import os
import select
import ssl
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import overload
from urllib.parse import unquote, urlsplit

#: A kept connection idle longer than this is closed rather than reused (httpx's default keep-alive expiry).
IDLE_SECONDS = 5.0
#: Kept connections per origin; more concurrent calls than this open extra ones, closed after use.
MAX_IDLE_PER_ORIGIN = 8


class ConnectError(OSError):
    """The connection could not be made (refused, unreachable, the TLS handshake failed): nothing was sent."""


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str]  # lower-cased names
    content: bytes


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int
    proxy: str | None  # the proxy URL this origin is reached through, if any


class _Kept:
    __slots__ = ("conn", "idle_since")

    def __init__(self, conn: http.client.HTTPConnection, idle_since: float) -> None:
        self.conn = conn
        self.idle_since = idle_since


_pools: dict[_Origin, list[_Kept]] = {}
_pools_pid: int | None = None
_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """The process's TLS context (building one loads a CA bundle: ~20 ms, so once)."""
    global _tls
    if _tls is None:
        cafile = os.environ.get("SSL_CERT_FILE") or None
        capath = os.environ.get("SSL_CERT_DIR") or None
        if cafile is None and capath is None:
            try:
                import certifi
            except ImportError:
                pass
            else:
                cafile = certifi.where()
        _tls = ssl.create_default_context(cafile=cafile, capath=capath)
    return _tls


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect: float) -> Response:
    """POST ``body`` to ``url`` over a kept connection and read the whole answer."""
    return post_begin(url, body, headers, timeout=timeout, connect=connect).finish()


@overload
def post_begin(url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect: float) -> Posted: ...
@overload
def post_begin(url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect: float,
               kept_only: bool) -> Posted | None: ...
def post_begin(url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect: float,
               kept_only: bool = False) -> Posted | None:
    """Send the POST now and read its answer later (``Posted.finish``), so the caller can do other work while
    the server thinks. A failure to connect or send is not raised here but by ``finish``. ``kept_only``: send
    only over a kept connection that is open now, else send nothing and answer None (the caller, holding
    locks, must not wait for a new connection's DNS, TCP and TLS)."""
    try:
        request = _Request.of(url, body, headers, timeout=timeout, connect=connect)
    except ConnectError as exc:
        return None if kept_only else Posted(None, None, False, exc)
    if kept_only:
        return request.send_kept()
    return request.send()


@dataclass
class _Request:
    origin: _Origin
    target: str
    body: bytes
    head: dict[str, str]
    timeout: float
    connect: float

    @classmethod
    def of(cls, url: str, body: bytes, headers: dict[str, str], *, timeout: float, connect: float) -> _Request:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectError(f"not an http(s) URL: {url}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        origin = _Origin(parts.scheme, parts.hostname, port, _proxy_for(parts.scheme, parts.hostname))
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        head = {"Content-Type": "application/json", **headers}
        if origin.proxy and origin.scheme == "http":
            target = f"http://{parts.netloc}{target}"  # a plain-HTTP proxy is sent the whole URL
            head.update(_proxy_auth(origin.proxy))
        return cls(origin, target, body, head, timeout, connect)

    def send_kept(self) -> Posted | None:
        """The request on its way over a kept connection open now, or None (nothing sent) when there is none or
        the send fails."""
        kept = _take(self.origin)
        if kept is None:
            return None
        try:
            kept.conn.request("POST", self.target, body=self.body, headers=self.head)
        except (OSError, http.client.HTTPException):
            kept.conn.close()
            return None
        return Posted(self, kept.conn, True, None)

    def send(self, *, kept_allowed: bool = True) -> Posted:
        """The request on its way: on a kept connection when there is one (a kept connection the server closed
        meanwhile fails the send: once more on a new one), else a new one. A failure is kept for ``finish``."""
        for attempt in range(2):
            kept = _take(self.origin) if attempt == 0 and kept_allowed else None
            try:
                conn = kept.conn if kept else _connect(self.origin, timeout=self.timeout, connect=self.connect)
            except (OSError, http.client.HTTPException) as exc:  # raised by finish, where the caller expects it
                return Posted(self, None, False, exc)
            try:
                conn.request("POST", self.target, body=self.body, headers=self.head)
            except (BrokenPipeError, ConnectionResetError) as exc:
                conn.close()
                if kept is None:
                    return Posted(self, None, False,
                                  ConnectionError(f"the server closed the connection: {exc}"))
                continue  # a kept connection the server closed meanwhile: once more on a new one
            except (OSError, http.client.HTTPException) as exc:  # as above
                conn.close()
                return Posted(self, None, False, exc)
            return Posted(self, conn, kept is not None, None)
        raise AssertionError("unreachable: the second attempt returns")


class Posted:
    """A POST sent whose answer is still to read (``post_begin``)."""

    def __init__(self, request: _Request | None, conn: http.client.HTTPConnection | None, kept: bool,
                 failure: BaseException | None) -> None:
        self._request, self._conn, self._kept, self._failure = request, conn, kept, failure

    def finish(self) -> Response:
        """Read the whole answer (or raise what went wrong); the connection is kept for the next call."""
        if self._failure is not None:
            raise self._failure
        conn, self._conn = self._conn, None
        if conn is None or self._request is None:
            raise RuntimeError("this answer was read or abandoned already")
        try:
            answer = conn.getresponse()
            content = answer.read()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected) as exc:
            conn.close()
            if not self._kept:
                raise ConnectionError(f"the server closed the connection: {exc}") from exc
            # A kept connection the server closed while the request was on its way: once more on a new one.
            return self._request.send(kept_allowed=False).finish()
        except BaseException:
            conn.close()
            raise
        response = Response(answer.status, answer.reason, {k.lower(): v for k, v in answer.getheaders()}, content)
        if answer.will_close:
            conn.close()
        else:
            _give_back(self._request.origin, conn)
        return response

    def abandon(self) -> None:
        """Not reading the answer after all: the connection is closed (its answer would arrive unasked)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _connect(origin: _Origin, *, timeout: float, connect: float) -> http.client.HTTPConnection:
    host, port = origin.host, origin.port
    tunnel = False
    if origin.proxy:
        proxy = urlsplit(origin.proxy)
        if proxy.scheme != "http":
            raise ConnectError(f"the proxy {proxy.scheme}://{proxy.hostname} is not supported: use an http:// proxy")
        host, port = proxy.hostname or "", proxy.port or 80
        tunnel = origin.scheme == "https"
    conn: http.client.HTTPConnection
    if origin.scheme == "https":
        conn = http.client.HTTPSConnection(host, port, timeout=connect, context=tls_context())
        if tunnel:
            conn.set_tunnel(origin.host, origin.port, headers=_proxy_auth(origin.proxy or ""))
    else:
        conn = http.client.HTTPConnection(host, port, timeout=connect)
    try:
        conn.connect()
    except TimeoutError:
        conn.close()
        raise
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        through = f" through the proxy {host}:{port} (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY)" if origin.proxy else ""
        raise ConnectError(f"could not connect to {origin.host}:{origin.port}{through}: {exc}") from exc
    assert conn.sock is not None
    conn.sock.settimeout(timeout)
    return conn


def _take(origin: _Origin) -> _Kept | None:
    """The most recently used kept connection to ``origin`` that is still open and fresh, if any."""
    global _pools_pid
    now = time.monotonic()
    stale: list[_Kept] = []
    found = None
    with _lock:
        if _pools_pid != os.getpid():  # a forked child must not share its parent's sockets
            _pools.clear()
            _pools_pid = os.getpid()
        pool = _pools.get(origin, [])
        while pool:
            kept = pool.pop()
            if now - kept.idle_since > IDLE_SECONDS or _closed_by_server(kept.conn):
                stale.append(kept)
                continue
            found = kept
            break
    for kept in stale:
        kept.conn.close()
    return found


def _give_back(origin: _Origin, conn: http.client.HTTPConnection) -> None:
    with _lock:
        if _pools_pid == os.getpid():
            pool = _pools.setdefault(origin, [])
            if len(pool) < MAX_IDLE_PER_ORIGIN:
                pool.append(_Kept(conn, time.monotonic()))
                return
    conn.close()


def _closed_by_server(conn: http.client.HTTPConnection) -> bool:
    """An idle kept connection has nothing to read; if its socket is readable, the server closed it (or sent
    something unasked), so it must not carry a request."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


#: The variables that decide proxying; read on every call (a few dict lookups), parsed only when they change.
_PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY",
                    "no_proxy", "REQUEST_METHOD")
_proxy_seen: tuple[tuple[str | None, ...], dict[tuple[str, str], str | None]] = ((), {})


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy URL the environment sets for ``scheme`` (``HTTP_PROXY``/``HTTPS_PROXY``, else ``ALL_PROXY``),
    unless ``NO_PROXY`` exempts ``host``. The standard library's answer walks the whole environment (~0.3 ms), so it is kept
    per scheme and host until one of those variables changes."""
    global _proxy_seen
    current = tuple(os.environ.get(name) for name in _PROXY_VARIABLES)
    seen, answers = _proxy_seen
    if seen != current:
        answers = {}
        _proxy_seen = (current, answers)
    key = (scheme, host)
    if key not in answers:
        proxies = urllib.request.getproxies_environment()
        proxy = proxies.get(scheme) or proxies.get("all")
        if proxy and urllib.request.proxy_bypass_environment(host):  # type: ignore[attr-defined]  # not in typeshed
            proxy = None
        answers[key] = proxy if not proxy or "://" in proxy else f"http://{proxy}"
    return answers[key]


def _proxy_auth(proxy_url: str) -> dict[str, str]:
    parts = urlsplit(proxy_url)
    if parts.username is None:
        return {}
    secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"Proxy-Authorization": "Basic " + base64.b64encode(secret).decode("ascii")}
