"""The model call's HTTP client (``core.keepalive``) against raw loopback servers: kept connections, a server that
closes them, timeouts, refusals, TLS and proxies from the environment."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localai_memory.core import keepalive

ANSWER = json.dumps({"ok": True}).encode()


class RawServer:
    """An HTTP/1.1 server on a raw socket; ``behave(n)`` says what to do with the n-th request of a connection:
    ``"answer"``, ``"answer-close"`` (answer, then close without saying so), ``"drop"`` (close unanswered),
    ``"hang"``. It records each connection and each request line and head."""

    def __init__(self, behave: Callable[[int], str] = lambda n: "answer", *, tls: ssl.SSLContext | None = None,
                 handler: Callable[[socket.socket, bytes], None] | None = None,
                 drop_on: frozenset[int] = frozenset()) -> None:
        self.behave = behave
        self.drop_on = drop_on  # connections (numbered from 1 as accepted) whose every request is dropped
        self.connections = 0
        self.requests: list[bytes] = []
        self._tls = tls
        self._handler = handler
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self.closed = threading.Event()  # set each time this server closes a connection
        self._stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if self._tls is not None:
                try:
                    conn = self._tls.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError):
                    conn.close()
                    continue
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number_of_connection: int = 0) -> None:
        buffer, number = b"", 0
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    buffer += chunk
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                if self._handler is not None:
                    self._handler(conn, head)
                    return
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                number += 1
                self.requests.append(head)
                action = "drop" if number_of_connection in self.drop_on else self.behave(number)
                if action == "drop":
                    break
                if action == "hang":
                    self._stopping.wait(5)
                    break
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER)
                if action == "answer-close":
                    break
        self.closed.set()  # after the with block: the socket is closed

    @property
    def url(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/v1/chat/completions"

    def close(self) -> None:
        self._stopping.set()
        self._listener.close()
        for conn in self._open:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture(autouse=True)
def fresh_client_state(monkeypatch) -> Iterator[None]:
    """No kept connection, TLS context or proxy setting leaks between tests."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(keepalive, "_tls", None)
    keepalive._pools.clear()
    yield
    keepalive._pools.clear()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(*args, **kwargs) -> RawServer:
        servers.append(RawServer(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def call(url: str, *, timeout: float = 5.0) -> keepalive.Response:
    return keepalive.post(url, b'{"hello": "there"}', {"Accept": "application/json"}, timeout=timeout, connect=5.0)


def test_calls_share_one_kept_connection_and_send_the_body(serve):
    server = serve()
    for _ in range(5):
        response = call(server.url)
        assert response.status == 200 and json.loads(response.content) == {"ok": True}
    assert server.connections == 1 and len(server.requests) == 5
    head = server.requests[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1")
    assert "Content-Type: application/json" in head and "Content-Length: 18" in head


def test_calls_at_once_each_get_a_connection_and_all_are_answered(serve):
    server = serve(lambda n: "answer")
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(call(server.url).status)) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 12
    assert len(keepalive._pools[next(iter(keepalive._pools))]) <= keepalive.MAX_IDLE_PER_ORIGIN


def test_a_connection_the_server_closed_while_idle_is_not_used_again(serve):
    server = serve(lambda n: "answer-close")
    assert call(server.url).status == 200
    assert server.closed.wait(5)  # the server's close is in the kept socket's queue once it has returned
    assert call(server.url).status == 200
    assert server.connections == 2 and len(server.requests) == 2  # the second on a new connection


def test_a_kept_connection_closed_in_flight_is_retried_once_on_a_new_one(serve):
    seen: dict[int, int] = {}

    def second_request_of_the_first_connection_is_dropped(n: int) -> str:
        seen[n] = seen.get(n, 0) + 1
        return "drop" if n == 2 and seen[n] == 1 else "answer"

    server = serve(second_request_of_the_first_connection_is_dropped)
    assert call(server.url).status == 200
    assert call(server.url).status == 200  # the first connection dropped it; the retry went on a new one
    assert server.connections == 2 and len(server.requests) == 3


def test_a_new_connection_closed_unanswered_is_an_error_not_a_retry(serve):
    server = serve(lambda n: "drop")
    with pytest.raises(ConnectionError):
        call(server.url)
    assert server.connections == 1 and len(server.requests) == 1


def test_a_server_that_does_not_answer_times_out(serve):
    server = serve(lambda n: "hang")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        call(server.url, timeout=0.3)
    assert time.monotonic() - started < 3
    assert not any(keepalive._pools.values())  # the timed-out connection is not kept


def test_nothing_listening_is_a_connect_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(keepalive.ConnectError, match="could not connect"):
            call(f"http://127.0.0.1:{port}/v1/chat/completions")


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def tls_server(serve, tmp_path) -> tuple[RawServer, Path]:
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return serve(tls=context), cert


def test_https_checks_the_certificate_against_ssl_cert_file(tls_server, monkeypatch):
    server, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert call(server.url).status == 200
    assert call(server.url).status == 200
    assert server.connections == 1


def test_https_refuses_a_certificate_nobody_vouches_for(tls_server):
    server, _ = tls_server  # not in certifi's bundle
    with pytest.raises(keepalive.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        call(server.url)


def test_an_http_proxy_from_the_environment_gets_the_whole_url_and_its_credentials(serve, monkeypatch):
    proxy = serve()
    monkeypatch.setenv("HTTP_PROXY", f"http://me:s%40cret@127.0.0.1:{proxy.port}")
    assert call("http://model.internal:8080/v1/chat/completions").status == 200
    head = proxy.requests[0].decode()
    assert head.startswith("POST http://model.internal:8080/v1/chat/completions HTTP/1.1")
    assert "Proxy-Authorization: Basic bWU6c0BjcmV0" in head  # me:s@cret


def test_no_proxy_sends_straight_to_the_server(serve, monkeypatch):
    proxy, server = serve(), serve()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert call(server.url).status == 200
    assert proxy.requests == [] and len(server.requests) == 1


def test_https_through_a_proxy_goes_through_a_connect_tunnel(tls_server, serve, monkeypatch):
    server, cert = tls_server
    tunnels: list[bytes] = []

    def tunnel(client: socket.socket, head: bytes) -> None:
        tunnels.append(head)
        upstream = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pump(source: socket.socket, sink: socket.socket) -> None:
            try:
                while chunk := source.recv(65536):
                    sink.sendall(chunk)
            except OSError:
                pass
            finally:
                sink.close()

        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)

    proxy = serve(handler=tunnel)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert call(server.url).status == 200
    assert tunnels and tunnels[0].decode().startswith(f"CONNECT 127.0.0.1:{server.port} HTTP/1.")


def test_a_proxy_setting_changed_while_running_is_followed(serve, monkeypatch):
    proxy, server = serve(), serve()
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    assert call(server.url).status == 200
    monkeypatch.delenv("HTTP_PROXY")
    assert call(server.url).status == 200
    assert len(proxy.requests) == 1 and len(server.requests) == 1


def test_the_retry_never_takes_a_second_stale_kept_connection(serve):
    server = serve(drop_on=frozenset({1, 2}))
    origin = keepalive._Origin("http", "127.0.0.1", server.port, None)
    for _ in range(2):  # two kept connections that the server closes under a request
        keepalive._give_back(origin, keepalive._connect(origin, timeout=5, connect=5))
    assert call(server.url).status == 200  # one kept connection drops it; the retry is on a new one
    assert server.connections == 3 and len(server.requests) == 2


def test_all_proxy_is_followed_and_a_proxy_of_another_kind_is_a_clear_error(serve, monkeypatch):
    proxy = serve()
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{proxy.port}")
    assert call("http://model.internal:8080/v1/chat/completions").status == 200
    assert proxy.requests[0].decode().startswith("POST http://model.internal:8080/v1/chat/completions")
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(keepalive.ConnectError, match="not supported"):
        call("http://model.internal:8080/v1/chat/completions")


def test_a_proxy_that_cannot_be_reached_is_named_in_the_error_not_only_the_server(monkeypatch):
    with socket.socket() as spare:  # a loopback port nobody listens on
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    with pytest.raises(keepalive.ConnectError, match=f"through the proxy 127.0.0.1:{port}"):
        call("http://model.internal:8080/v1/chat/completions")


def begin(url: str) -> keepalive.Posted:
    return keepalive.post_begin(url, b'{"hello": "there"}', {"Accept": "application/json"}, timeout=5.0, connect=5.0)


def test_a_request_sent_ahead_is_on_the_server_before_its_answer_is_read(serve):
    arrived = threading.Event()

    def note_arrival(n: int) -> str:
        arrived.set()
        return "answer"

    server = serve(note_arrival)
    posted = begin(server.url)
    assert arrived.wait(5)  # the server has it while the client does other work, not reading
    response = posted.finish()
    assert response.status == 200 and json.loads(response.content) == {"ok": True}
    assert call(server.url).status == 200 and server.connections == 1  # its connection was kept


def test_a_request_sent_ahead_to_nothing_listening_fails_when_its_answer_is_read():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        posted = begin(f"http://127.0.0.1:{port}/v1/chat/completions")  # no error yet: the caller goes on
        with pytest.raises(keepalive.ConnectError, match="could not connect"):
            posted.finish()


def test_an_answer_not_read_after_all_closes_its_connection(serve):
    server = serve(lambda n: "answer")
    posted = begin(server.url)
    posted.abandon()
    assert not any(keepalive._pools.values())  # never kept: its answer would come unasked
    assert call(server.url).status == 200 and server.connections == 2


def test_a_request_sent_only_over_a_kept_connection_sends_nothing_when_there_is_none(serve):
    server = serve(lambda n: "answer")
    url = server.url
    assert keepalive.post_begin(url, b"{}", {}, timeout=5.0, connect=5.0, kept_only=True) is None
    assert server.connections == 0 and server.requests == []  # no connection made for it
    assert call(url).status == 200  # now one is kept
    posted = keepalive.post_begin(url, b"{}", {}, timeout=5.0, connect=5.0, kept_only=True)
    assert posted is not None and posted.finish().status == 200
    assert server.connections == 1 and len(server.requests) == 2
