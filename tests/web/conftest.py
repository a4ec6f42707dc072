"""Browser fixtures: Debian's Chromium driven by Playwright against pytest-django's live server.

One browser per test module; a fresh context (cookies, downloads) per test. The app and
the browser use different database connections, so every browser test runs with ``transactional_db``. After
each test the final state of the page is saved under ``test-artifacts/web/<test name>.png``.

Playwright's sync API keeps an asyncio loop running in this thread while the browser is open, so Django's
"no ORM inside an event loop" guard would trip on every ORM call of the tests (this worker's later tests too);
``DJANGO_ALLOW_ASYNC_UNSAFE`` is set for exactly as long as the browser is open.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.test import Client
from playwright.sync_api import Browser, Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "web"
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
PASSWORD = "correct horse battery staple"

#: axe-core rules this suite waives, each with the reason (also in the README). Empty: none is waived.
WAIVED_AXE_RULES: dict[str, str] = {}

expect.set_options(timeout=10_000)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One browser per test module. Playwright keeps an asyncio loop running while it is open, which would
    break other tests' ``asyncio.run`` on the same worker, so it is closed when the module ends (the Makefile
    runs with ``--dist loadfile`` to keep a module's tests together)."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium) first")
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@dataclass
class Web:
    """One person's browser tab on the live server, with the few steps every test needs."""

    page: Page
    base_url: str
    name: str
    checked: set[str] = field(default_factory=set)

    def go(self, path: str) -> Page:
        self.page.goto(self.base_url + path)
        return self.page

    def register(self, username: str, password: str = PASSWORD) -> None:
        self.go("/register/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password", exact=True).fill(password)
        self.page.get_by_label("Password again").fill(password)
        self.page.get_by_role("button", name="Create account").click()
        expect(self.page.get_by_role("button", name="Log out")).to_be_visible()

    def login(self, username: str, password: str = PASSWORD) -> None:
        self.go("/login/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Log in").click()
        expect(self.page.get_by_role("button", name="Log out")).to_be_visible()

    def logout(self) -> None:
        self.page.get_by_role("button", name="Log out").click()
        expect(self.page.get_by_role("heading", name="Log in")).to_be_visible()

    def accessible(self, label: str | None = None) -> None:
        """axe-core on the current page: no violations at all (WCAG 2.1 A/AA and best practices), labels and
        contrast included. Failures list each rule with the first offending elements."""
        self.page.add_script_tag(path=str(AXE_JS))
        violations = self.page.evaluate(
            """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
                 .map(v => ({id: v.id, impact: v.impact, help: v.help,
                             nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' :: ' + n.failureSummary)}))"""
        )
        violations = [v for v in violations if v["id"] not in WAIVED_AXE_RULES]
        self.checked.add(label or self.page.url)
        assert violations == [], f"axe found problems on {self.page.url}:\n" + "\n".join(
            f"- {v['id']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(v["nodes"]) for v in violations)

    def screenshot(self, suffix: str = "") -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}{'-' + suffix if suffix else ''}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def _artifact_name(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")[:120]


@pytest.fixture
def new_web(browser: Browser, live_server, transactional_db, settings, request):
    """Open another browser context (another person): ``new_web("bob")``; ``javascript=False`` for a browser
    without it (every form works without it). Each is screenshotted at the end."""
    settings.OPEN_SIGNUP = True
    opened: list[tuple[Web, object]] = []

    def make(suffix: str = "", *, viewport: dict | None = None, timezone_id: str | None = None,
             locale: str | None = None, javascript: bool = True) -> Web:
        context = browser.new_context(base_url=live_server.url, accept_downloads=True,
                                      viewport=viewport or {"width": 1200, "height": 900},
                                      timezone_id=timezone_id, locale=locale, java_script_enabled=javascript)
        page = context.new_page()
        page.set_default_timeout(10_000)
        name = _artifact_name(request) + (f"-{suffix}" if suffix else "")
        web = Web(page=page, base_url=live_server.url, name=name)
        opened.append((web, context))
        return web

    yield make
    for web, context in opened:
        try:
            web.screenshot()
        finally:
            context.close()  # type: ignore[attr-defined]


@pytest.fixture
def web(new_web) -> Web:
    return new_web()


@pytest.fixture
def model(openai_server, settings):
    """The loopback OpenAI-protocol model server the chat page talks to."""
    settings.LLM_BASE_URL = openai_server.url
    settings.LLM_MODEL = "fake-model"
    settings.LLM_API_KEY = ""
    settings.LLM_TIMEOUT = 10.0
    return openai_server


def signed_in(user) -> Client:
    """A Django test client logged in as ``user`` (for the pages' forms without a browser)."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def operator(db, client):
    """A superuser, logged in on the test client (the admin's pages)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("operator", "op@example.org", "correct horse battery staple")
    client.force_login(user)
    return user
