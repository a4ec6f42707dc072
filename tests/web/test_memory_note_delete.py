"""Deleting one note on the Memory tab acts on the signed-in person's notes only, and its Undo is theirs."""

from __future__ import annotations

import pytest

from localai_memory.agents.models import Agent
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert

from .conftest import signed_in

pytestmark = pytest.mark.django_db

DELETE = "/settings/memory/notes/delete/"


def index(user, scope: Scope | None = None) -> str:
    return notes_selectors.index_text(owner_id=user.pk, scope=scope or Scope.user())


def test_deleting_a_note_removes_its_line_and_file_in_one_change_and_offers_undo(owner):
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", details="Since 2020.",
                source="files", actor="you")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian", source="files", actor="you")
    client = signed_in(owner)

    response = client.post(DELETE, {"scope": "user", "topic": "home", "next": "/settings/memory/?tab=yours#notes"})

    change = ChangeSet.objects.filter(owner=owner).first()
    assert response.status_code == 302
    assert response["Location"] == f"/settings/memory/?tab=yours&deleted={change.pk}#notes"
    assert index(owner) == "- diet: vegetarian\n"
    assert sorted(f.path for f in change.files.all()) == ["Memory/home.md", "Memory/index.md"]
    page = client.get(response["Location"]).content.decode()
    assert 'Deleted the note “home”. Its files are in the <a href="/files/trash/">Trash</a>.' in page
    assert f'action="/changes/{change.pk}/undo/"' in page


def test_another_user_cannot_delete_a_note_or_an_agents_note_or_see_the_undo(owner, outsider):
    agent = Agent.objects.create(owner=owner, name="Chef")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Lisbon", source="files",
                actor="you")
    note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="menu", summary="no nuts", source="files",
                actor="you")
    mine = signed_in(owner).post(DELETE, {"scope": "user", "topic": "home"})
    assert mine.status_code == 302
    change = ChangeSet.objects.filter(owner=owner).first()
    intruder = signed_in(outsider)

    assert intruder.post(DELETE, {"scope": f"agent:{agent.pk}", "topic": "menu"}).status_code == 404
    refused = intruder.post(DELETE, {"scope": "user", "topic": "menu"}, follow=True)
    assert "There is no note" in refused.content.decode()
    assert index(owner, Scope.agent(agent.pk)) == "- menu: no nuts\n"
    page = intruder.get(f"/settings/memory/?deleted={change.pk}").content.decode()
    assert "note-deleted" not in page
    assert "Lisbon" not in page


def test_a_note_you_confirmed_can_be_undone_from_its_card_long_after_the_chat_undo_window(owner):
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    from localai_memory.memory.proposals import proposal_confirm, proposal_create
    from localai_memory.memory.services import settings_update

    settings_update(user_id=owner.pk, save_mode="always")
    proposal = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegan")
    change = proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="you")
    assert index(owner) == "- diet: vegan\n"

    with time_machine.travel(timezone.now() + timedelta(hours=2)):  # the chat's 30 minutes are long over
        undone = signed_in(owner).post(f"/changes/{change.pk}/undo/", {"next": "/inbox/"}, follow=True)

    assert "Undid “Saved diet in your notes”: memory is as it was before it." in undone.content.decode()
    assert index(owner) == ""


def test_a_delete_refused_for_a_note_changed_meanwhile_lands_on_the_note_where_the_message_is(owner):
    """Without JavaScript the browser scrolls to the redirect's fragment: the note's row, not the list's top."""
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    client = signed_in(owner)
    page = client.get("/settings/memory/?tab=yours").content.decode()
    version = page.split('name="note_version" value="', 1)[1].split('"', 1)[0]
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Lisbon", source="files",
                actor="you")  # another tab

    response = client.post(DELETE, {"scope": "user", "topic": "home", "note_version": version,
                                    "at": "note-1-home", "next": "/settings/memory/?tab=yours#notes"})

    assert response.status_code == 302 and response["Location"] == "/settings/memory/?tab=yours#note-1-home"
    assert index(owner) == "- home: lives in Lisbon\n"
    assert "It now reads: “lives in Lisbon”" in client.get(response["Location"]).content.decode()


def test_a_landing_that_is_not_a_plain_id_is_not_put_in_the_redirect(owner):
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    response = signed_in(owner).post(DELETE, {"scope": "user", "topic": "home", "note_version": "0" * 16,
                                              "at": "x\r\nSet-Cookie: a=b", "next": "/settings/memory/#notes"})
    assert response.status_code == 302 and response["Location"] == "/settings/memory/#notes"


def test_a_note_whose_importance_alone_changed_meanwhile_says_so_when_the_delete_is_refused(owner):
    from localai_memory.notes.services import note_importance_set

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    client = signed_in(owner)
    page = client.get("/settings/memory/?tab=yours").content.decode()
    version = page.split('name="note_version" value="', 1)[1].split('"', 1)[0]
    note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.9, actor="you")

    shown = client.post(DELETE, {"scope": "user", "topic": "home", "note_version": version, "at": "note-1-home",
                                 "next": "/settings/memory/?tab=yours#notes"}, follow=True).content.decode()

    assert "It now reads: “lives in Rome”, importance 0.9." in shown
    assert index(owner) == "- home: lives in Rome\n"


def test_the_tabs_forms_read_a_version_in_capitals_as_the_api_terminal_and_mcp_do(owner):
    """The version a form sends is read as every way in reads it (``notes.services.note_version_given``): one
    in capitals is the same version, not a bad one (the terminal took it; the tab said it was not a version)."""
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    client = signed_in(owner)
    page = client.get("/settings/memory/?tab=yours").content.decode()
    version = page.split('name="note_version" value="', 1)[1].split('"', 1)[0]

    weighed = client.post("/settings/memory/notes/importance/",
                          {"scope": "user", "topic": "home", "importance": "0.9", "note_version": version.upper()},
                          follow=True).content.decode()
    assert "The note “home” now has importance 0.9." in weighed
    stale = client.post(DELETE, {"scope": "user", "topic": "home", "note_version": version.upper()}, follow=True)
    assert "It now reads: “lives in Rome”, importance 0.9." in stale.content.decode()
    now = notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(), topic="home")
    assert client.post(DELETE, {"scope": "user", "topic": "home", "note_version": now.upper()}).status_code == 302
    assert index(owner) == ""
