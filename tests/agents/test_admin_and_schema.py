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
    url = f"/admin/agents/agent/{agent.pk}/change/"
    response = admin_client.post(url, {"name": "Chef", "instructions": "You cook."})
    assert response.status_code == 302, response.content.decode()[:2000]
    agent.refresh_from_db()
    assert (agent.name, agent.instructions) == ("Chef", "You cook.")

    bad = admin_client.post(url, {"name": "Chef\x07", "instructions": ""})
    assert bad.status_code == 200 and "name may not contain control characters" in bad.content.decode()
    agent.refresh_from_db()
    assert agent.name == "Chef"


def test_an_agents_memory_choices_are_its_owners_and_the_admin_only_shows_them(admin_client, owner):
    """Its memory choice, save rule, grants, Tools and Add-ons decide what it reads and saves of its owner's
    memory: the owner sets them in the agent form; an administrator sees them and cannot change them, nor make
    an agent for somebody."""
    agent = services.agent_create(owner_id=owner.pk, name="Cook", tools=[], addons=[], grants=[], memory="none",
                                  memory_save="never")
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "None" in page and "Never" in page
    assert not any(f'name="{field}"' in page for field in ("memory", "memory_save", "grants", "tools", "addons"))

    response = admin_client.post(url, {"name": "Cook", "instructions": "", "tools": '["memory"]',
                                       "addons": '["memory"]', "grants": '["memory.write"]',
                                       "memory": "mine_and_own", "memory_save": ""})

    assert response.status_code == 302
    agent.refresh_from_db()
    assert (agent.memory, agent.memory_save, agent.grants, agent.tools, agent.addons) == ("none", "never", [], [], [])
    assert admin_client.get("/admin/agents/agent/add/").status_code == 403


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


def test_an_agent_deleted_in_the_admin_says_where_its_notes_are_as_the_web_does(admin_client, owner):
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    agent = services.agent_create(owner_id=owner.pk, name="Cook", memory="own")
    note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="diet", summary="Cooks vegetarian",
                source="files", actor="you")
    page = admin_client.post(f"/admin/agents/agent/{agent.pk}/delete/", {"post": "yes"}, follow=True)
    text = page.content.decode()
    assert "Its notes stay; they show on the Memory tab under Deleted agents." in text
    bare = services.agent_create(owner_id=owner.pk, name="Empty")
    page = admin_client.post("/admin/agents/agent/", {"action": "delete_selected", "_selected_action": [bare.pk],
                                                      "post": "yes"}, follow=True)
    assert "“Empty”: The agent is deleted. It had no notes." in page.content.decode()
    assert not Agent.objects.filter(pk__in=[agent.pk, bare.pk]).exists()
