"""A proposed change that would pass an index cap is refused when it is proposed, with the current entries,
so the model can merge them; it never becomes a proposal that can not be confirmed."""

from __future__ import annotations

import pytest

from localai_memory.memory.models import Proposal
from localai_memory.notes.paths import index_size
from tests.chats.helpers import index_of, new_chat, note, send, tool_results
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db


SUBJECTS = ["lives in Rome", "vegetarian, no fish", "speaks Italian and English", "uses metric units",
            "wants short answers", "works as a nurse", "plays the cello", "allergic to peanuts",
            "has two daughters", "cycles to work"]


def nearly_full_index(owner) -> None:
    """Ten long lines and one short one: a few bytes under the 2 KiB cap."""
    for number, subject in enumerate(SUBJECTS):
        note(owner, f"t{number:02d}", f"{subject} ".ljust(190, "."))
    note(owner, "extra", "keeps a cat called Miso".ljust(52, "."))
    lines, size = index_size(index_of(owner))
    assert lines == 11 and 2040 <= size <= 2048


def test_a_proposal_to_lengthen_a_note_past_the_index_cap_is_refused_with_the_entries(api, owner, model):
    nearly_full_index(owner)
    before = index_of(owner)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "t00", "summary": "lives in Rome, near the Pantheon".ljust(200, ".")})),
                 reply("The index is full."))

    body = send(api, new_chat(api), "Make my first note longer.")

    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "cap_exceeded"
    assert [entry["topic"] for entry in result["entries"]] == [f"t{n:02d}" for n in range(10)] + ["extra"]
    assert body["memory"]["proposed"] == [] and body["memory"]["refused"][0]["reason"] == "cap_exceeded"
    assert not Proposal.objects.exists()
    assert index_of(owner) == before


def test_a_proposal_to_shorten_a_note_of_a_full_index_is_made(api, owner, model):
    nearly_full_index(owner)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "t00", "summary": "short"})),
                 reply("Waiting for you."))

    body = send(api, new_chat(api), "Make my first note shorter.")

    [proposed] = body["memory"]["proposed"]
    confirmed = api.post(f"/api/chats/memory/proposals/{proposed['proposal_id']}/confirm")
    assert confirmed.status_code == 200
    assert "- t00: short\n" in index_of(owner)
