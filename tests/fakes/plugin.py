"""pytest fixtures for the loopback fakes: one fresh, started server per test, stopped afterwards.

Enable with `pytest_plugins = ["tests.fakes.plugin"]` in the root conftest (or import the fixtures).
Stopping joins every thread a fake started, so nothing leaks from one test to the next.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.discord_server import DiscordServer
from tests.fakes.openai_server import OpenAIServer
from tests.fakes.slack_server import SlackServer
from tests.fakes.telegram_server import TelegramServer

__all__ = ["discord_server", "openai_server", "slack_server", "telegram_server"]


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """An OpenAI-compatible model server; configure the client with `openai_server.url` (`.../v1`)."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def telegram_server() -> Iterator[TelegramServer]:
    """A Telegram Bot API; `telegram_server.url` is the base_url for python-telegram-bot."""
    with TelegramServer() as server:
        yield server


@pytest.fixture
def slack_server() -> Iterator[SlackServer]:
    """A Slack Web API; `slack_server.url` (ends with /api/) is the base_url for slack_sdk.WebClient."""
    with SlackServer() as server:
        yield server


@pytest.fixture
def discord_server() -> Iterator[DiscordServer]:
    """Discord REST + gateway; wrap the client's life in `with discord_server.patch_discord_py():`."""
    with DiscordServer() as server:
        yield server
