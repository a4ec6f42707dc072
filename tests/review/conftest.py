"""Fixtures of the review tests: the bridges' bots and people, and the chats' model server."""

from __future__ import annotations

from tests.bridges.conftest import (  # noqa: F401  (fixtures)
    alice,
    bob,
    carol,
    discord_bot,
    quick_retries,
    slack_bot,
    telegram_bot,
)
from tests.chats.helpers import model  # noqa: F401  (the model fixture)
