"""The Memory tab's Ask again for a memory add-on that could not drop a deleted agent's notes, without
JavaScript, and only for the person whose request it is."""

from __future__ import annotations

import pytest

from localai_memory.agents.models import Agent
from localai_memory.agents.services import agent_delete
from localai_memory.memory.models import AddonForgetRequest
from localai_memory.memory.services import provider_pick

from .conftest import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(owner, monkeypatch):
    """The agent "Chef" deleted with its notes while the sample add-on, which holds some of them, was down."""
    import sample_memory_provider

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    provider_pick(user_id=owner.pk, provider="sample")
    agent = Agent.objects.create(owner=owner, name="Chef")
    sample_memory_provider.SCOPED[(owner.pk, f"agent:{agent.pk}")] = {"recipe": "knows risotto"}
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="delete")
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN")
    return sample_memory_provider, agent.pk, AddonForgetRequest.objects.get(owner=owner)


def test_ask_again_drops_the_agents_notes_in_the_addon_and_says_so_where_the_list_was(owner, waiting):
    addon, agent_id, request = waiting
    client = signed_in(owner)
    assert "may still hold the notes of the agent “Chef”" in client.get("/settings/memory/").content.decode()

    response = client.post(f"/settings/memory/addon-forgets/{request.pk}/ask/")

    assert response.status_code == 302 and response["Location"] == "/settings/memory/#addons"
    page = client.get(response["Location"]).content.decode()
    shown = page[page.index('id="addons"'):page.index('id="saving"')]
    assert "The memory add-on Sample memory add-on forgot the notes of the agent “Chef”." in shown
    assert "Ask again" not in page
    assert (owner.pk, f"agent:{agent_id}") not in addon.SCOPED


def test_another_user_cannot_ask_again_for_someone_elses_request(owner, outsider, waiting):
    addon, agent_id, request = waiting

    assert signed_in(outsider).post(f"/settings/memory/addon-forgets/{request.pk}/ask/").status_code == 404
    assert "Chef" not in signed_in(outsider).get("/settings/memory/").content.decode()
    assert addon.SCOPED[(owner.pk, f"agent:{agent_id}")] == {"recipe": "knows risotto"}
    assert AddonForgetRequest.objects.filter(pk=request.pk).exists()
