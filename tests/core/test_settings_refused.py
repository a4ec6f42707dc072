"""A setting that cannot work stops the start with one line that says what to write (README, Configuration),
instead of a traceback at start or errors later: a throttle rate DRF cannot read made every log-in a 500, a
log level Python does not know a traceback, a URL without its scheme a failure at the first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
THROWAWAY = {"DATABASE_URL": "postgresql://x@localhost/x", "REDIS_URL": "redis://localhost:6379/0",
             "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30}


def outside_the_tests() -> dict[str, str]:
    """The environment of a process nobody started from a test (a server): without pytest's mark."""
    return {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}


def manage_py_check(**variables: str) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` with throwaway server URLs (never connected to) and ``variables``, on a data folder of
    its own (empty unless given: what a start says can depend on a key made there before)."""
    with tempfile.TemporaryDirectory() as data_dir:
        env = {**outside_the_tests(), **THROWAWAY, "LOCALAI_MEMORY_DATA_DIR": data_dir, **variables}
        return subprocess.run([sys.executable, "manage.py", "check"], cwd=PROJECT_ROOT, env=env, capture_output=True,
                              text=True, timeout=60, check=False)


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("LOCALAI_MEMORY_AUTH_THROTTLE", "lots", ("LOCALAI_MEMORY_AUTH_THROTTLE='lots' is not a rate: write tries per "
                                             "second, minute, hour or day, e.g. 20/min or 300/hour")),
    ("LOCALAI_MEMORY_AUTH_THROTTLE", "0/min", ("LOCALAI_MEMORY_AUTH_THROTTLE='0/min' is not a rate: write tries per "
                                              "second, minute, hour or day, e.g. 20/min or 300/hour")),
    ("LOCALAI_MEMORY_AUTH_THROTTLE", "20/fortnight", ("LOCALAI_MEMORY_AUTH_THROTTLE='20/fortnight' is not a rate: "
                                                     "write tries per second, minute, hour or day, e.g. 20/min or "
                                                     "300/hour")),
    ("LOG_LEVEL", "LOUD", "LOG_LEVEL='LOUD' is not a log level (use DEBUG, INFO, WARNING, ERROR or CRITICAL)"),
    ("DATABASE_URL", "postgresql://x@localhost:abc/x",
     "DATABASE_URL has a port that is not a port number (1 to 65535)"),
    ("REDIS_URL", "localhost:6379", ("REDIS_URL must be a URL starting with redis://, rediss:// or unix://, "
                                    "e.g. redis://localhost:6379/0")),
    ("LLM_BASE_URL", "localhost:8080/v1", ("LLM_BASE_URL must be a URL starting with http:// or https://, "
                                          "e.g. http://127.0.0.1:8080/v1")),
    ("EMBEDDINGS_BASE_URL", "127.0.0.1:8081", ("EMBEDDINGS_BASE_URL must be a URL starting with http:// or "
                                              "https://, e.g. http://127.0.0.1:8080/v1")),
    ("LOCALAI_MEMORY_PUBLIC_URL", "memory.example.org", ("LOCALAI_MEMORY_PUBLIC_URL must be a URL starting with "
                                                        "http:// or https://, e.g. https://memory.example.org")),
    ("DISCORD_GATEWAY_URL", "https://gateway.discord.gg/", ("DISCORD_GATEWAY_URL must be a URL starting with "
                                                           "ws:// or wss://, e.g. wss://gateway.discord.gg/")),
    ("CSRF_TRUSTED_ORIGINS", "memory.example.org", ("CSRF_TRUSTED_ORIGINS: 'memory.example.org' must start with "
                                                   "its scheme, e.g. https://memory.example.org")),
    ("DATA_UPLOAD_MAX_MEMORY_SIZE", "-1", "DATA_UPLOAD_MAX_MEMORY_SIZE must be a number of bytes, at least 1"),
    ("LOCALAI_MEMORY_WORKER_NICE", "40", ("LOCALAI_MEMORY_WORKER_NICE must be from 0 (as started) to 19 (yields "
                                         "the most)")),
    ("SECRET_KEY", "change-me-to-a-long-random-string", ("SECRET_KEY is the README's example: give a random one of "
                                                        "at least 32 characters, e.g. python -c 'import secrets; "
                                                        "print(secrets.token_urlsafe(50))' (with a new key everyone logs in again, and without BRIDGES_SECRET_KEY each bot's credentials are entered again)")),
    ("SECRET_KEY", "hunter2", ("SECRET_KEY is too short: give a random one of at least 32 characters, e.g. python "
                               "-c 'import secrets; print(secrets.token_urlsafe(50))' (with a new key everyone logs in again, and without BRIDGES_SECRET_KEY each bot's credentials are entered again)")),
    # the bots' key keys every stored bot token: the same rule as SECRET_KEY's
    ("BRIDGES_SECRET_KEY", "change-me-to-a-long-random-string", ("BRIDGES_SECRET_KEY is the README's example: give "
                                                                "a random one of at least 32 characters, e.g. "
                                                                "python -c 'import secrets; "
                                                                "print(secrets.token_urlsafe(50))' (with a new key each bot's credentials are entered again)")),
    ("BRIDGES_SECRET_KEY", "hunter2", ("BRIDGES_SECRET_KEY is too short: give a random one of at least 32 "
                                       "characters, e.g. python -c 'import secrets; "
                                       "print(secrets.token_urlsafe(50))' (with a new key each bot's credentials are entered again)")),
    # with a database of its own (several machines), a key made by each machine would not carry between them
    ("SECRET_KEY", "", ("SECRET_KEY is not set: with DATABASE_URL every machine would make a key of its own; set "
                        "SECRET_KEY (or SECRET_KEY_FILE) to the same random one on each, e.g. python -c 'import "
                        "secrets; print(secrets.token_urlsafe(50))'")),
    ("LOCALAI_MEMORY_CONSOLIDATION_INTERVAL", "5", "LOCALAI_MEMORY_CONSOLIDATION_INTERVAL must be at least 60 seconds"),
    ("DATABASE_CONN_MAX_AGE", "-1", "DATABASE_CONN_MAX_AGE must be a number of seconds, 0 or more"),
])
def test_a_setting_that_cannot_work_stops_the_start_with_one_line(variable: str, value: str, said: str) -> None:
    out = manage_py_check(**{variable: value})
    assert out.returncode == 1
    assert out.stderr == f"ImproperlyConfigured: {said}\n"


def test_a_url_with_a_password_is_not_repeated_in_the_refusal() -> None:
    out = manage_py_check(REDIS_URL="redis:/:hunter2@localhost:6379/0")
    assert out.returncode == 1 and "REDIS_URL must be a URL" in out.stderr and "hunter2" not in out.stderr


def test_the_values_the_readme_gives_start() -> None:
    out = manage_py_check(LOCALAI_MEMORY_AUTH_THROTTLE="300/hour", LOG_LEVEL="warning",
                          REDIS_URL="unix:///tmp/redis.sock", LLM_BASE_URL="https://models.example.org/v1",
                          CSRF_TRUSTED_ORIGINS="https://memory.example.org", DATABASE_URL="postgresql://x@db:5432/x")
    assert out.returncode == 0, out.stderr


def settings_of(*names: str, **variables: str) -> dict:
    """The values of settings ``names`` as a server process (not started by a test) reads them."""
    code = ("import django, json; django.setup(); from django.conf import settings; "
            f"print(json.dumps({{name: getattr(settings, name) for name in {list(names)!r}}}))")
    env = {**outside_the_tests(), **THROWAWAY, "DJANGO_SETTINGS_MODULE": "localai_memory.settings", **variables}
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_the_test_switch_is_refused_on_a_server() -> None:
    # it would hash passwords with MD5, use a fixed secret key and let 1000 log-in tries a minute through
    out = manage_py_check(LOCALAI_MEMORY_TESTING="1")
    assert out.returncode == 1
    assert out.stderr == ("ImproperlyConfigured: LOCALAI_MEMORY_TESTING is for the processes the test suite starts "
                          "(it weakens password hashing and the secret key): unset it\n")


def test_the_test_switch_still_works_in_a_process_a_test_started() -> None:
    env = {**os.environ, **THROWAWAY, "LOCALAI_MEMORY_TESTING": "1", "DJANGO_SETTINGS_MODULE": "localai_memory.settings"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.PASSWORD_HASHERS[0])"
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "django.contrib.auth.hashers.MD5PasswordHasher"


def test_a_server_answers_only_its_own_names_by_default_not_the_test_clients() -> None:
    assert settings_of("ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS") == {
        "ALLOWED_HOSTS": ["localhost", "127.0.0.1", "[::1]"], "CSRF_TRUSTED_ORIGINS": []}


def test_a_weak_secret_key_in_a_file_is_refused_too_and_debug_takes_any(tmp_path: Path) -> None:
    key_file = tmp_path / "secret_key"
    key_file.write_text("change-me-to-a-long-random-string\n")
    out = manage_py_check(SECRET_KEY="", SECRET_KEY_FILE=str(key_file))
    assert out.returncode == 1 and out.stderr.startswith("ImproperlyConfigured: SECRET_KEY is the README's example")
    assert manage_py_check(SECRET_KEY="x", DEBUG="1").returncode == 0  # development: any key


def test_a_strong_bots_key_starts_and_debug_takes_any() -> None:
    fernet_key = "ufEBLp8bZ4E7dR4swnpmxSAKSUpTAz_KXPpnA5jJjpo="  # a Fernet key: 44 characters
    assert manage_py_check(BRIDGES_SECRET_KEY=fernet_key).returncode == 0
    assert manage_py_check(BRIDGES_SECRET_KEY="x", DEBUG="1").returncode == 0  # development: any key


def test_without_database_url_the_machine_still_makes_its_own_key(tmp_path: Path) -> None:
    """The embedded default is one machine: it makes a key once and keeps it, as before."""
    env = {**{name: value for name, value in outside_the_tests().items()
              if name not in {"DATABASE_URL", "SECRET_KEY", "SECRET_KEY_FILE"}},
           "REDIS_URL": THROWAWAY["REDIS_URL"], "LOCALAI_MEMORY_DATA_DIR": str(tmp_path),
           "LOCALAI_MEMORY_EMBEDDED_START": "0"}  # names the embedded database's folder, starts nothing
    out = subprocess.run([sys.executable, "manage.py", "check"], cwd=PROJECT_ROOT, env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "secret_key").read_text().strip()) >= 50


def test_with_database_url_and_debug_on_no_key_is_needed() -> None:
    assert manage_py_check(SECRET_KEY="", DEBUG="1").returncode == 0


@pytest.mark.parametrize("command", [
    # as compose and the image start them, and with the config named by its file
    ["gunicorn", "localai_memory.wsgi:application", "-c", "python:localai_memory.gunicorn_conf",
     "--bind", "127.0.0.1:0", "--workers", "2"],
    ["gunicorn", "localai_memory.wsgi:application", "-c", "localai_memory/gunicorn_conf.py",
     "--bind", "127.0.0.1:0", "--workers", "1"],
    ["celery", "-A", "localai_memory", "worker", "-l", "info", "-Q", "localai_memory"],
    ["celery", "-A", "localai_memory", "beat", "-l", "info", "-s", "{tmp}/celerybeat-schedule"],
], ids=["gunicorn", "gunicorn-config-file", "celery-worker", "celery-beat"])
def test_gunicorn_and_celery_started_directly_refuse_a_setting_in_the_same_one_line(
        command: list[str], tmp_path: Path) -> None:
    """Where manage.py says the one line, gunicorn logged a traceback per worker and stopped with "Worker
    failed to boot", and Celery ended in a traceback: the line to act on was at the bottom of forty."""
    said = manage_py_check(SECRET_KEY="hunter2").stderr
    assert said.startswith("ImproperlyConfigured: SECRET_KEY is too short")
    env = {**outside_the_tests(), **THROWAWAY, "SECRET_KEY": "hunter2"}
    out = subprocess.run([sys.executable, "-m", *(part.format(tmp=tmp_path) for part in command)], cwd=PROJECT_ROOT,
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 1
    assert out.stderr == said


def test_a_machine_that_made_its_key_is_told_to_keep_it_when_database_url_now_needs_one(tmp_path: Path) -> None:
    """A machine that ran with DATABASE_URL and no SECRET_KEY made a key in its data folder, which signs its
    sessions and keys the bots' stored credentials. Now that the start stops, a new random key (all the line
    said) logged everyone out and left every bot's credentials unreadable: the line names the key it has."""
    made = tmp_path / "secret_key"
    made.write_text("a-key-this-machine-made-" + "m" * 40)

    out = manage_py_check(SECRET_KEY="", LOCALAI_MEMORY_DATA_DIR=str(tmp_path))

    assert out.returncode == 1
    assert out.stderr == (f"ImproperlyConfigured: SECRET_KEY is not set: with DATABASE_URL every machine would make a "
                          f"key of its own; set SECRET_KEY (or SECRET_KEY_FILE) to the same random one on each: this "
                          f"machine's key so far is in {made}; give SECRET_KEY_FILE={made} (or its content as "
                          "SECRET_KEY) to this machine and every other, so that sessions and the bots' stored "
                          "credentials stay readable (a new key logs everyone out and the bots' credentials must be "
                          "entered again)\n")
    assert manage_py_check(SECRET_KEY="", SECRET_KEY_FILE=str(made), LOCALAI_MEMORY_DATA_DIR=str(tmp_path)
                           ).returncode == 0
