"""The agents admin (list, filters, search, edits through the services) and the API schema."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from localai_memory.agents import services
from localai_memory.agents.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.invalid", "correct horse battery")
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_lists_agents_with_their_memory_choices_and_searches_them(admin_client, owner):
    services.agent_create(owner_id=owner.pk, name="Cook", memory="mine_and_own", memory_save="always")
    services.agent_create(owner_id=owner.pk, name="Legacy")
    page = admin_client.get("/admin/agents/agent/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Mine and its own" in text and "As before" in text and "Always confirm" in text
    found = admin_client.get("/admin/agents/agent/?q=cook").content.decode()
    assert "Cook" in found and "Legacy" not in found
    as_before = admin_client.get("/admin/agents/agent/?memory_choice=as_before").content.decode()
    assert "Legacy" in as_before and ">Cook<" not in as_before


def test_an_agent_edited_in_the_admin_goes_through_the_same_rules(admin_client, owner):
    agent = services.agent_create(owner_id=owner.pk, name="Cook", memory="own")
    form = {"name": "Chef", "instructions": "", "tools": '["memory"]', "addons": "[]", "grants": "[]",
            "memory": "mine", "memory_save": "never"}
    response = admin_client.post(f"/admin/agents/agent/{agent.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    agent.refresh_from_db()
    assert (agent.name, agent.memory, agent.memory_save, agent.grants) == ("Chef", "mine", "never", [])

    bad = admin_client.post(f"/admin/agents/agent/{agent.pk}/change/", {**form, "tools": '["Memory"]'})
    assert bad.status_code == 200 and "is not a name" in bad.content.decode()
    agent.refresh_from_db()
    assert agent.tools == ["memory"]


def test_the_database_refuses_a_rule_looser_than_always(owner):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Agent.objects.create(owner=owner, name="Loose", memory_save="auto")


def test_the_schema_documents_every_agent_route(client):
    schema = client.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert set(paths["/api/chats/agents"]) >= {"get", "post"}
    assert set(paths["/api/chats/agents/{agent_id}"]) >= {"get", "put", "delete"}
    assert "get" in paths["/api/chats/agents/{agent_id}/export"]
    assert "post" in paths["/api/chats/agents/import"]
    delete = paths["/api/chats/agents/{agent_id}"]["delete"]
    memory = next(p for p in delete["parameters"] if p["name"] == "memory")
    assert set(memory["schema"]["enum"]) == {"keep", "export", "delete"}
    assert set(delete["responses"]["200"]["content"]) == {"application/json", "application/zip"}
