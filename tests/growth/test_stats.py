"""``GET /api/chats/memory/stats``: lines and bytes against the caps, topics, proposals waiting, last change."""

from __future__ import annotations

import pytest

from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_create
from localai_memory.memory.services import settings_update
from localai_memory.notes import services as notes_services
from localai_memory.notes.paths import Scope

pytestmark = pytest.mark.django_db
URL = "/api/chats/memory/stats"


@pytest.fixture
def alices_notes(owner):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               details="Moved in 2024.", source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(7), topic="tone", summary="short answers",
                               source="files", actor="you")
    proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="units", summary="metric",
                    source=Proposal.Source.CONSOLIDATION, origin="job")


def test_it_shows_each_scope_against_the_caps(api, alices_notes):
    body = api.get(URL).json()

    user = next(s for s in body["scopes"] if s["kind"] == "user")
    index = "- home: lives in Rome -> home.md\n- diet: vegetarian\n"
    assert (user["lines"], user["max_lines"]) == (2, 40)
    assert (user["bytes"], user["max_bytes"]) == (len(index.encode()), 2048)
    assert [t["topic"] for t in user["topics"]] == ["home", "diet"]
    assert user["topics"][0]["file_bytes"] == len(b"Moved in 2024.\n")
    assert user["pending_proposals"] == 1 and user["last_change"]["summary"] == "Saved diet in your notes"
    agent = next(s for s in body["scopes"] if s["kind"] == "agent")
    assert (agent["key"], agent["lines"], agent["deleted_agent"]) == ("7", 1, True)
    assert body["totals"]["topics"] == 3 and body["totals"]["pending_proposals"] == 1
    assert body["totals"]["turn_max_bytes"] == 6144
    assert body["last_change"]["summary"] == "Saved tone in agent 7"


def test_it_works_while_memory_is_off(api, owner, alices_notes):
    settings_update(user_id=owner.pk, enabled=False)

    body = api.get(URL).json()

    assert body["memory"]["enabled"] is False and body["totals"]["topics"] == 3


def test_an_outsider_sees_nothing_of_alices_memory(outsider_api, alices_notes):
    body = outsider_api.get(URL).json()

    assert body["totals"]["topics"] == 0 and body["totals"]["pending_proposals"] == 0
    assert body["last_change"] is None
    assert [s["kind"] for s in body["scopes"]] == ["user"]


def test_it_needs_a_login(anon_api):
    assert anon_api.get(URL).status_code == 401


def test_a_suggestion_waiting_for_a_memory_addon_is_counted_apart_not_against_the_built_in_notes(
        api, owner, alices_notes, monkeypatch):
    """The add-on keeps its own notes: a suggestion for it waits in the inbox, but not on the built-in notes
    of "your notes", so the stats count it as its own number (the API, the terminal)."""
    from localai_memory.memory.proposals import addon_proposal_create
    from localai_memory.memory.services import provider_pick
    from tests.growth.test_memory_command import memory

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    provider_pick(user_id=owner.pk, provider="sample")
    addon_proposal_create(owner_id=owner.pk, provider="sample", topic="garden", summary="grows tomatoes")
    addon_proposal_create(owner_id=owner.pk, provider="sample", topic="units", summary="metric")

    body = api.get(URL).json()

    user = next(s for s in body["scopes"] if s["kind"] == "user")
    assert user["pending_proposals"] == 1  # the built-in one of the fixture
    assert (body["totals"]["pending_proposals"], body["totals"]["addon_pending_proposals"]) == (1, 2)
    out = memory("stats", user="alice")
    assert "1 waiting, 2 waiting for the memory add-on," in out
    user_row = next(line for line in out.splitlines() if line.startswith("user "))
    assert user_row.split()[5] == "1"  # the waiting column


def test_without_addon_suggestions_the_terminal_says_nothing_of_them(owner, alices_notes):
    from tests.growth.test_memory_command import memory

    assert "add-on" not in memory("stats", user="alice")


def test_a_conversation_whose_first_note_waits_is_listed_so_the_waiting_suggestions_add_up(api, owner,
                                                                                           alices_notes):
    from tests.growth.test_memory_command import memory

    proposal_create(owner_id=owner.pk, scope=Scope("channel", "7-0123456789ab"), topic="meetup",
                    summary="group meets on Fridays")

    body = api.get(URL).json()

    channel = next(s for s in body["scopes"] if s["kind"] == "channel")
    assert channel["key"] == "7-0123456789ab" and channel["pending_proposals"] == 1 and channel["files"] == 0
    assert body["totals"]["pending_proposals"] == sum(s["pending_proposals"] for s in body["scopes"]) == 2
    assert "channel:7-0123456789ab" in memory("stats", user="alice")
