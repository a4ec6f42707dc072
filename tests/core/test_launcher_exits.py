"""``manage.py up`` (``make run``) says why it stopped and exits non-zero, unless you pressed Ctrl-C.

The launcher's supervisor runs real child processes here (tiny Python programs standing in for gunicorn and
Celery), polling every 10 ms instead of every half second, so a failed start is seen at once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localai_memory.core.management.commands.up import RestartBudget, Supervisor, address_to_open

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: a child that runs until it is stopped (a stand-in for a server)
RUNS = [sys.executable, "-c", "import signal; signal.pause()"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def supervise(children: dict[str, list[str]], port: int,
              budget: RestartBudget | None = None) -> tuple[str | None, list[str], list[str]]:
    """Run the launcher's supervisor; return its reason to stop, what it announced and what it said."""
    announced: list[str] = []
    said: list[str] = []
    reason = Supervisor(children, env=dict(os.environ), cwd=PROJECT_ROOT, web=("127.0.0.1", port),
                        on_ready=lambda: announced.append("running at"), say=said.append, budget=budget,
                        poll=0.01).run()
    return reason, announced, said


def test_a_web_server_that_cannot_start_stops_everything_with_a_reason_and_never_says_running_at() -> None:
    reason, announced, said = supervise(
        {"web": [sys.executable, "-c", "raise SystemExit(1)"], "worker": RUNS}, free_port())
    assert reason == "the web server could not start: it exited with 1; see its log above"
    assert announced == []
    assert said == ["web exited with 1; stopping everything."]


def test_a_worker_that_keeps_dying_stops_everything_with_a_reason() -> None:
    reason, _, said = supervise({"web": RUNS, "worker": [sys.executable, "-c", "raise SystemExit(2)"]},
                                free_port(), budget=RestartBudget(limit=2, window=60))
    assert reason == "the worker kept exiting (last with 2; 2 restarts within 60 s); see its log above"
    assert said == ["worker exited with 2; starting it again."] * 2 + ["worker exited with 2; stopping everything."]


def test_running_at_is_said_once_the_web_server_answers() -> None:
    port = free_port()
    # Listens, answers the launcher's knock, then exits as a web server stopped from outside would.
    web = [sys.executable, "-c",
           f"import socket; server = socket.create_server(('127.0.0.1', {port})); server.accept()[0].close()"]
    reason, announced, _ = supervise({"web": web}, port)
    assert announced == ["running at"]
    assert reason == "the web server exited with 0"


def test_ctrl_c_stops_everything_with_no_reason_and_gives_ctrl_c_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    press_ctrl_c = [sys.executable, "-c",
                    "import os, signal; os.kill(os.getppid(), signal.SIGINT); signal.pause()"]
    reason, _, said = supervise({"web": press_ctrl_c, "worker": RUNS}, free_port())
    assert reason is None and said == []
    assert signal.getsignal(signal.SIGINT) is before


def test_up_refuses_a_port_in_use_before_starting_anything(taken_port: int) -> None:
    # Throwaway server URLs: the refusal comes before the launcher touches the database.
    env = {**os.environ, "DATABASE_URL": "postgresql://x@localhost/x", "REDIS_URL": "redis://localhost:6379/0",
           "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30}
    out = subprocess.run([sys.executable, "manage.py", "up", "--port", str(taken_port), "--no-worker", "--no-bridges"],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (f"CommandError: the web server could not start: port {taken_port} is in use "
                                  f"(another server listens on 127.0.0.1:{taken_port}; stop it, or pick another "
                                  "port with --port or PORT)")
    assert "running at" not in out.stdout


@pytest.mark.parametrize("port", ["abc", "0"])  # 0 would serve on a port picked at random, never named
def test_up_refuses_a_port_variable_that_is_no_port_in_one_line(port: str) -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql://x@localhost/x", "REDIS_URL": "redis://localhost:6379/0",
           "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30, "PORT": port}
    out = subprocess.run([sys.executable, "manage.py", "up", "--no-worker", "--no-bridges"],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert out.stderr == f"CommandError: PORT={port!r} is not a port number (1 to 65535)\n"
    assert "running at" not in out.stdout


@pytest.mark.parametrize(("flags", "said"), [
    (["--workers", "0"], "argument --workers: 0 is too few: at least 1"),
    (["--threads", "-2"], "argument --threads: -2 is too few: at least 1"),
    (["--workers", "two"], "argument --workers: 'two' is not a whole number"),
    (["--port", "70000"], "argument --port: 70000 is not a port number (1 to 65535)"),
])
def test_up_refuses_a_count_or_port_that_cannot_work_before_starting_anything(flags: list[str], said: str) -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql://x@localhost/x", "REDIS_URL": "redis://localhost:6379/0",
           "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30}
    out = subprocess.run([sys.executable, "manage.py", "up", *flags, "--no-worker", "--no-bridges"],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].endswith(said), out.stderr
    assert "running at" not in out.stdout


@pytest.mark.parametrize(("host", "said"), [("127.0.0.1", "http://127.0.0.1:8741"), ("0.0.0.0", "http://127.0.0.1:8741"),
                                            ("::", "http://[::1]:8741"), ("memory.lan", "http://memory.lan:8741")])
def test_up_names_an_address_a_browser_can_open_and_the_bots_endpoints_use_its_port(host: str, said: str) -> None:
    # "running at http://0.0.0.0:8000/" opened nothing; the children's LOCALAI_MEMORY_PUBLIC_URL is this address
    assert address_to_open(host, 8741) == said
