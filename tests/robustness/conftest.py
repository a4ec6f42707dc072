"""Fixtures of the race and abuse tests: the model server of the chat tests, wired into the settings."""

from tests.chats.helpers import model  # noqa: F401  (the model fixture)
