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
    found = re.search(r'data-testid="memory-off-line">(.*?)</div>', page, re.DOTALL)
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


def test_new_chat_clicked_again_and_again_opens_the_same_empty_chat_not_a_pile_of_them(owner, api):
    from localai_memory.agents.services import agent_create
    from localai_memory.chats.models import Chat, Message, Role

    client = signed_in(owner)
    opened = {client.post("/chats/new/")["Location"] for _ in range(3)}
    assert len(opened) == 1 and Chat.objects.filter(owner=owner).count() == 1
    first = Chat.objects.get(owner=owner)
    # Once something is said in it, New chat opens a new one; an agent's New chat is that agent's.
    Message.objects.create(chat=first, role=Role.USER, content="Hello")
    second = client.post("/chats/new/")["Location"]
    assert second != f"/chats/{first.pk}/"
    chef = agent_create(owner_id=owner.pk, name="Chef")
    with_chef = client.post("/chats/new/", {"agent": chef.pk})["Location"]
    assert with_chef != second and client.post("/chats/new/", {"agent": chef.pk})["Location"] == with_chef
    # A chat made private on purpose is not handed out again as a fresh one.
    chat_services.chat_set_private(owner_id=owner.pk, chat_id=int(second.strip("/").split("/")[-1]), private=True)
    assert client.post("/chats/new/")["Location"] != second
    assert Chat.objects.filter(owner=owner).count() == 4
    # The API and the bots make the chat they ask for, as before.
    assert api.post("/api/chats", {}, format="json").status_code == 201
    assert api.post("/api/chats", {}, format="json").status_code == 201
    assert Chat.objects.filter(owner=owner).count() == 6
