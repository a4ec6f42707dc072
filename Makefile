# The two commands of the README: `make run` (install and run the app) and `make test` (install and run
# every test). Everything else here is what those two need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: run test install install-test browser migrate bench lint

# One virtualenv for both: tests/addons/sample_memory_provider (the tests' memory add-on) is installed into it,
# and offers itself only under the test suite (SAMPLE_PROVIDER_ENABLED=1, set by conftest.py), never in `make run`.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[test]'
	$(PIP) install -e tests/addons/sample_memory_provider
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) manage.py up

# Debian's Chromium (browser tests) and axe-core (accessibility checks), as the README explains.
browser:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	@test -f node_modules/axe-core/axe.min.js || npm install --no-save --no-audit --no-fund axe-core@4 >/dev/null

test: install browser
	$(PY) -m pytest -n 2 --dist loadfile -q

migrate: install
	$(PY) manage.py migrate

# mypy's Django plugin imports the settings, which would start the embedded PostgreSQL and Redis when
# DATABASE_URL / REDIS_URL are unset: throwaway URLs (never connected to) keep it to reading the settings.
LINT_ENV := DATABASE_URL=postgresql://x@localhost/x REDIS_URL=redis://localhost:6379/0 SECRET_KEY=lint-only-throwaway-key-0123456789abcdef

lint: install
	$(VENV)/bin/ruff check localai_memory bridges tests bench
	$(LINT_ENV) $(VENV)/bin/mypy
