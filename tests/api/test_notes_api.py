"""One note at a time over the API, as on the Memory tab: ``PUT /api/chats/memory/notes`` adds or replaces a
note, ``DELETE`` forgets it into the Trash; each is one change set with an Undo, and only the user's own."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from localai_memory.agents.models import Agent
from localai_memory.notes import selectors
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope

from .conftest import assert_error, post_json, put_json

pytestmark = pytest.mark.django_db

NOTES = "/api/chats/memory/notes"


def forget(client, **query):
    return client.delete(f"{NOTES}?{urlencode(query)}")


def test_a_note_is_added_replaced_forgotten_into_the_trash_and_undone(api, owner):
    added = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "details": "Trastevere."})
    assert added.status_code == 200, added.content
    assert added.json()["index"] == "- home: lives in Rome -> home.md\n"
    replaced = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon"})
    assert replaced.json()["index"] == "- home: lives in Lisbon -> home.md\n"
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "Trastevere.\n"

    gone = forget(api, topic="home")
    assert gone.status_code == 200 and gone.json()["trash"]["kind"] == "note"
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""
    undone = post_json(api, f"/api/chats/changes/{gone.json()['change']['id']}/undo", {})
    assert undone.status_code == 200, undone.content
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Lisbon -> home.md\n"


def test_an_agents_notes_are_reached_by_its_scope_and_another_users_agent_is_a_404(api, owner, outsider):
    mine = Agent.objects.create(owner=owner, name="Chef")
    theirs = Agent.objects.create(owner=outsider, name="Mallory's")
    assert put_json(api, NOTES, {"topic": "menu", "summary": "no nuts", "scope": f"agent:{mine.pk}"}).status_code == 200
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.agent(mine.pk)) == "- menu: no nuts\n"
    assert_error(put_json(api, NOTES, {"topic": "menu", "summary": "x", "scope": f"agent:{theirs.pk}"}), 404)
    assert_error(forget(api, topic="menu", scope=f"agent:{theirs.pk}"), 404)
    assert selectors.index_text(owner_id=outsider.pk, scope=Scope.agent(theirs.pk)) == ""


def test_another_user_cannot_forget_my_note(api, outsider_api, owner):
    put_json(api, NOTES, {"topic": "diet", "summary": "vegan"})
    assert_error(forget(outsider_api, topic="diet"), 404, "unknown_topic")
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- diet: vegan\n"


@pytest.mark.parametrize(("body", "code"), [
    ({"topic": "Home!", "summary": "x"}, "invalid_topic"),
    ({"topic": "home", "summary": "  "}, "invalid_summary"),
    ({"topic": "home", "summary": "x", "scope": "galaxy:1"}, "invalid_scope"),
    ({"topic": "home", "summary": "x", "colour": "red"}, "unknown_field"),
    ({"topic": "home", "summary": 7}, None),
])
def test_bad_input_is_a_400_that_says_what_is_wrong_and_writes_nothing(api, owner, body, code):
    assert_error(put_json(api, NOTES, body), 400, code)
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""


def test_a_note_past_the_cap_is_a_422_listing_the_current_entries(api, owner):
    for n in range(INDEX_MAX_LINES):
        assert put_json(api, NOTES, {"topic": f"t{n:02d}", "summary": f"fact {n}"}).status_code == 200
    refused = assert_error(put_json(api, NOTES, {"topic": "one-more", "summary": "too many"}), 422, "cap_exceeded")
    assert len(refused["details"]["entries"]) == INDEX_MAX_LINES
