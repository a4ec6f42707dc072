"""The chat pages' server output, read with Django's test client: the "memory is off" line, New chat."""

from __future__ import annotations

import html
import re

import pytest

from localai_memory.chats import services as chat_services
from localai_memory.memory import services as memory_services

from .conftest import signed_in

pytestmark = pytest.mark.django_db


def off_line(page: str) -> str:
    """The text of the chat's "memory is off" line, tags and runs of spaces taken out."""
    found = re.search(r'data-testid="memory-off-line">(.*?)</div>', page, re.S)
    assert found, "no memory-off line"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def test_the_memory_off_line_says_each_thing_once_off_in_the_settings(owner):
    memory_services.settings_update(user_id=owner.pk, enabled=False)
    chat = chat_services.chat_create(owner_id=owner.pk)

    line = off_line(signed_in(owner).get(f"/chats/{chat.pk}/").content.decode())

    assert line.lower().count("memory is off in your settings") == 1, line
    assert line.startswith("Memory is off in your settings. Turn it on under Your settings, then Memory.")


def test_the_memory_off_line_says_each_thing_once_in_a_private_chat(owner):
    chat = chat_services.chat_create(owner_id=owner.pk)
    chat_services.chat_set_private(owner_id=owner.pk, chat_id=chat.pk, private=True)

    line = off_line(signed_in(owner).get(f"/chats/{chat.pk}/").content.decode())

    assert line.lower().count("chat is private") == 1, line
    assert line.startswith("Memory is off because this chat is private. Turn Memory on in the chat's Tools menu")
