"""A note's Importance form on the Memory tab without JavaScript: a refused importance (not a number from 0 to 1,
the note changed in another tab) comes back in the note's form, open, with the reason beside it."""

from __future__ import annotations

import re

import pytest

from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_importance_set, note_upsert

from .conftest import signed_in

pytestmark = pytest.mark.django_db

IMPORTANCE = "/settings/memory/notes/importance/"
NEXT = "/settings/memory/?tab=yours#note-1-home"


def note_row(page: str, row_id: str = "note-1-home") -> str:
    """The note's row of the tab (its line, its Importance form and the messages about it)."""
    start = page.index(f'<li id="{row_id}">')
    return page[start:page.index("</li>", start)]


def importance_form(row: str) -> tuple[bool, str]:
    """(is the folded Importance section open, the number in its box)."""
    details = re.search(r'<details class="weigh small"( open)?>', row)
    value = re.search(r'name="importance" type="number"[^>]*value="([^"]*)"', row)
    assert details is not None and value is not None, row
    return bool(details.group(1)), value.group(1)


def version_shown(page: str) -> str:
    return page.split('name="note_version" value="', 1)[1].split('"', 1)[0]


def importance_of(owner) -> float | None:
    return notes_selectors.note_importances(owner_id=owner.pk).get(("user", "", "home"))


def test_an_importance_refused_for_a_note_changed_meanwhile_is_typed_again_by_the_reason(owner):
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    client = signed_in(owner)
    version = version_shown(client.get("/settings/memory/?tab=yours").content.decode())
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Lisbon", source="files",
                actor="you")  # another tab

    response = client.post(IMPORTANCE, {"scope": "user", "topic": "home", "importance": "0.35",
                                        "note_version": version, "next": NEXT})

    assert response.status_code == 302 and response["Location"] == NEXT
    row = note_row(client.get(response["Location"]).content.decode())
    assert importance_form(row) == (True, "0.35")
    assert ("so its importance was not changed. It now reads: “lives in Lisbon”. What you typed is still in its "
            "form: save it again if you still want it.") in row
    assert importance_of(owner) is None
    # Saved again from the page as it is now (its version), the number is kept; the form folds again.
    page = client.post(IMPORTANCE, {"scope": "user", "topic": "home", "importance": "0.35",
                                    "note_version": version_shown(row), "next": NEXT}, follow=True).content.decode()
    assert "The note “home” now has importance 0.35." in note_row(page)
    assert importance_form(note_row(page)) == (False, "0.35")
    assert importance_of(owner) == 0.35


def test_an_importance_that_is_no_number_from_0_to_1_is_typed_again_with_what_is_wrong(owner):
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.9, actor="you")
    client = signed_in(owner)

    page = client.post(IMPORTANCE, {"scope": "user", "topic": "home", "importance": "5", "next": NEXT},
                       follow=True).content.decode()

    row = note_row(page)
    assert importance_form(row) == (True, "5")
    assert "Importance is a number from 0 to 1, or empty for the default." in row
    assert importance_of(owner) == 0.9
    again = note_row(client.get("/settings/memory/?tab=yours").content.decode())  # shown once, then as it is
    assert importance_form(again) == (False, "0.9")


def test_a_refused_importance_is_typed_again_only_in_its_own_notes_form(owner):
    for topic in ("diet", "home"):
        note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=topic, summary=f"about {topic}", source="files",
                    actor="you")
    client = signed_in(owner)

    page = client.post(IMPORTANCE, {"scope": "user", "topic": "home", "importance": "-1", "next": NEXT},
                       follow=True).content.decode()

    assert importance_form(note_row(page)) == (True, "-1")
    assert importance_form(note_row(page, "note-1-diet")) == (False, "")
