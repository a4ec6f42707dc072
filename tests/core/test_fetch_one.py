"""``core.db.fetch_one``, the compiler-free read every turn starts with: the same objects as the ORM gives,
the joined row attached (or known to be absent) without another query, and nobody else's row."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from localai_memory.accounts.models import ApiToken, hash_key
from localai_memory.accounts.services import token_create
from localai_memory.agents.models import Agent
from localai_memory.chats.models import Chat
from localai_memory.chats.services import chat_create
from localai_memory.core.db import fetch_one

pytestmark = pytest.mark.django_db


def test_a_chat_comes_back_as_the_orm_gives_it_with_its_agent_attached(owner):
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], grants=["memory.write"])
    chat = chat_create(owner_id=owner.pk, agent_id=agent.pk, title="Dinner")
    with CaptureQueriesContext(connection) as queries:
        found = fetch_one(Chat, join="agent", pk=chat.pk, owner_id=owner.pk)
        assert found.agent.tools == ["memory"] and found.agent.grants == ["memory.write"]  # JSON, not text
    assert len(queries) == 1
    orm = Chat.objects.select_related("agent").get(pk=chat.pk)
    assert [getattr(found, f.attname) for f in Chat._meta.concrete_fields] == [
        getattr(orm, f.attname) for f in Chat._meta.concrete_fields]


def test_a_chat_without_an_agent_says_so_without_asking_the_database_again(owner):
    chat = chat_create(owner_id=owner.pk, title="Plain")
    found = fetch_one(Chat, join="agent", pk=chat.pk, owner_id=owner.pk)
    with CaptureQueriesContext(connection) as queries:
        assert found.agent is None
    assert len(queries) == 0


def test_another_owners_chat_or_a_bad_id_is_not_found(owner, outsider):
    chat = chat_create(owner_id=owner.pk, title="Mine")
    assert fetch_one(Chat, join="agent", pk=chat.pk, owner_id=outsider.pk) is None
    with pytest.raises(ValueError):
        fetch_one(Chat, pk="12; DROP TABLE chats_chat", owner_id=owner.pk)
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_a_token_comes_back_with_its_user(owner):
    key = token_create(user=owner)
    token = fetch_one(ApiToken, join="user", key_hash=hash_key(key))
    assert token.user == owner and token.user.username == "alice" and token.user.is_active
    assert fetch_one(ApiToken, join="user", key_hash=hash_key(key + "x")) is None
