"""A reply whose one call proposes a note: the model is asked again with the result the note's write gives
when nothing stands in the way, and the note is written while the model thinks. What the person reads is
always the model's answer to what was really done: the ids and times the model was told are those of the note
saved or waiting, and when the write answered otherwise (something changed meanwhile), the model is asked
again with the real result and its first answer is never shown. Where the turn's read already tells that the
note will not be written as proposed, the model is asked only once the write answered (a model server is not
kept busy with an answer that would be thrown away)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory.models import Proposal
from localai_memory.notes.models import ChangeSet
from tests.chats.helpers import index_of, make_agent, new_chat, note, send, set_memory, tool_results
from tests.fakes.openai_server import reply, tool_calls
from tests.support.meanwhile import meanwhile

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def answers_its_result(request: dict) -> Any:
    """The model says what its call's result says."""
    [result] = tool_results(request)
    said = "already" if result.get("already_saved") or result.get("already_waiting") else result["status"]
    return reply(f"The note is {said}.")


def proposes(model, arguments: dict, *, first: Any = None) -> None:
    """The model proposes a note, then answers every result it is given (``first``: its first reply, when it
    is to do something before)."""
    call = tool_calls(("propose_change", arguments))
    model.script(first(call) if first else call, answers_its_result, answers_its_result)


@pytest.mark.django_db
def test_a_note_saved_at_once_is_announced_with_the_change_its_undo_takes_back(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    proposes(model, VEGAN)

    body = send(api, chat, "Remember that I am vegan.")

    assert body["reply"] == "The note is saved." and len(model.requests) == 2
    [result] = tool_results(model.last_request)
    change = ChangeSet.objects.get(owner=owner, automatic=True)
    assert result["change_id"] == change.pk == body["memory"]["saved"][0]["change_id"]
    assert result["undo_until"] == change.undo_until.isoformat() == body["memory"]["saved"][0]["undo_until"]
    assert index_of(owner) == "- diet: vegan, no honey\n"
    assert api.post(f"/api/chats/changes/{result['change_id']}/undo", format="json").status_code == 200
    assert index_of(owner) == ""


@pytest.mark.django_db
def test_a_proposal_is_announced_with_the_id_and_expiry_the_inbox_shows(api, owner, model):
    chat = new_chat(api)
    proposes(model, VEGAN)

    body = send(api, chat, "Remember that I am vegan.")

    assert body["reply"] == "The note is proposed." and len(model.requests) == 2
    [result] = tool_results(model.last_request)
    proposal = Proposal.objects.get(owner=owner)
    assert result["proposal_id"] == proposal.pk == body["memory"]["proposed"][0]["proposal_id"]
    assert result["expires_at"] == proposal.expires_at.isoformat() == body["memory"]["proposed"][0]["expires_at"]
    [waiting] = api.get("/api/chats/memory/proposals").json()["proposals"]
    assert waiting["id"] == result["proposal_id"]
    assert api.post(f"/api/chats/memory/proposals/{result['proposal_id']}/confirm").status_code == 200
    assert index_of(owner) == "- diet: vegan, no honey\n"


@pytest.mark.django_db(transaction=True)  # the person saves the same note in another tab while the model thinks
def test_a_note_saved_meanwhile_elsewhere_is_answered_as_already_saved_and_the_first_answer_is_not_shown(
        api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    proposes(model, VEGAN, first=lambda call: meanwhile(lambda: note(owner, "diet", "vegan, no honey"), call))

    body = send(api, chat, "Remember that I am vegan.")

    told, really = (tool_results(request)[0] for request in model.requests[1:])
    assert told["status"] == "saved" and told["change_id"] is not None  # asked before the write answered
    assert really["status"] == "saved" and really["already_saved"] is True and really["change_id"] is None
    assert body["reply"] == "The note is already." and len(model.requests) == 3
    assert body["memory"]["saved"][0]["already_saved"] is True
    assert not ChangeSet.objects.filter(pk=told["change_id"]).exists()
    assert list(ChangeSet.objects.filter(owner=owner).values_list("actor", flat=True)) == ["you"]
    assert index_of(owner) == "- diet: vegan, no honey\n"


@pytest.mark.django_db(transaction=True)  # the index fills up in another tab while the model thinks
def test_a_note_the_full_index_refuses_meanwhile_is_answered_with_the_refusal(api, owner, model):
    for number in range(39):
        note(owner, f"t{number:02d}", f"line {number}")
    chat = new_chat(api)
    proposes(model, VEGAN, first=lambda call: meanwhile(lambda: note(owner, "home", "Rome"), call))

    body = send(api, chat, "Remember that I am vegan.")

    told, really = (tool_results(request)[0] for request in model.requests[1:])
    assert told["status"] == "proposed" and really["status"] == "refused" and really["reason"] == "cap_exceeded"
    assert body["reply"] == "The note is refused." and body["memory"]["proposed"] == []
    assert not Proposal.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_a_note_memory_already_holds_is_answered_once(api, owner, model, save_mode):
    set_memory(owner, save_mode=save_mode)
    note(owner, "diet", "vegan, no honey")
    proposes(model, VEGAN)

    body = send(api, new_chat(api), "Remember that I am vegan.")

    assert body["reply"] == "The note is already." and len(model.requests) == 2
    assert not Proposal.objects.exists() and ChangeSet.objects.filter(owner=owner).count() == 1


@pytest.mark.django_db
def test_a_note_the_full_index_refuses_is_answered_once(api, owner, model):
    for number in range(40):
        note(owner, f"t{number:02d}", f"line {number}")
    proposes(model, VEGAN)

    body = send(api, new_chat(api), "Remember that I am vegan.")

    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and len(result["entries"]) == 40
    assert body["reply"] == "The note is refused." and len(model.requests) == 2


@pytest.mark.django_db
@pytest.mark.parametrize("proposed", [VEGAN, {"kind": "memory", "topic": "diet", "delete": True}],
                         ids=["a note", "a forget"])
def test_a_proposal_already_waiting_is_answered_once_and_waits_once(api, owner, model, proposed):
    note(owner, "diet", "vegetarian")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", proposed)), reply("I will ask you."))
    send(api, chat, "Remember that I am vegan.")
    model.requests.clear()
    proposes(model, proposed)

    body = send(api, chat, "Did you get that? I am vegan.")

    assert body["reply"] == "The note is already." and len(model.requests) == 2
    assert Proposal.objects.filter(owner=owner, status="pending").count() == 1
    assert Proposal.objects.get().expires_at > timezone.now()


@pytest.mark.django_db
def test_the_same_proposal_after_the_first_expired_waits_anew_and_is_answered_once(api, owner, model):
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", VEGAN)), reply("I will ask you."))
    send(api, chat, "Remember that I am vegan.")
    model.requests.clear()
    proposes(model, VEGAN)

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        body = send(api, chat, "I am vegan, remember?")

    assert body["reply"] == "The note is proposed." and len(model.requests) == 2
    assert sorted(Proposal.objects.values_list("status", flat=True)) == ["expired", "pending"]
    assert Proposal.objects.get(status="pending").pk == body["memory"]["proposed"][0]["proposal_id"]


@pytest.mark.django_db
def test_forgetting_a_note_that_is_not_there_is_answered_once(api, owner, model):
    set_memory(owner, save_mode="auto")
    proposes(model, {"kind": "memory", "topic": "diet", "delete": True})

    body = send(api, new_chat(api), "Forget my diet.")

    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "unknown_topic"
    assert body["reply"] == "The note is refused." and len(model.requests) == 2


@pytest.mark.django_db
@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_a_line_with_arrows_side_by_side_is_answered_once_and_named_as_stored(api, owner, model, save_mode):
    set_memory(owner, save_mode=save_mode)
    proposes(model, {"kind": "memory", "topic": "drinks", "summary": "tea -> -> coffee"})

    body = send(api, new_chat(api), "Remember: tea, then coffee.")

    assert len(model.requests) == 2 and body["reply"] == f"The note is {'saved' if save_mode == 'auto' else 'proposed'}."
    [made] = body["memory"]["saved" if save_mode == "auto" else "proposed"]
    assert made["summary"] == tool_results(model.last_request)[0].get("summary", made["summary"]) == "tea → → coffee"
    if save_mode == "auto":
        assert index_of(owner) == "- drinks: tea → → coffee\n"
    else:
        assert Proposal.objects.get().summary == "tea → → coffee"


#: Notes the write takes as proposed: (what the person's notes hold, what the model proposes).
TAKEN = {
    "a new note with details": ({}, {**VEGAN, "details": "No eggs either.\nNo gelatine."}),
    "an update of a note with a topic file": ({"diet": ("vegetarian", "No meat.\n")},
                                              {**VEGAN, "summary": "vegan, no honey, no meat"}),
    "a forget": ({"diet": ("vegetarian", None)}, {"kind": "memory", "topic": "diet", "delete": True}),
    "a line that says less than the note's": ({"diet": ("vegan, no honey, no eggs", None)}, VEGAN),
    "details that drop a line of the file": ({"diet": ("vegan", "No eggs.\nNo gelatine.\n")},
                                             {**VEGAN, "details": "No eggs."}),
}


@pytest.mark.django_db
@pytest.mark.parametrize("save_mode", ["auto", "ask", "always"])
@pytest.mark.parametrize("case", list(TAKEN))
def test_a_note_the_write_takes_as_proposed_is_answered_once(api, owner, model, save_mode, case):
    holds, proposed = TAKEN[case]
    set_memory(owner, save_mode=save_mode)
    for topic, (summary, details) in holds.items():
        note(owner, topic, summary, details=details)
    proposes(model, proposed)

    body = send(api, new_chat(api), "Please remember.")

    [result] = tool_results(model.last_request)
    assert result["status"] in ("saved", "proposed") and len(model.requests) == 2
    assert body["reply"] == f"The note is {result['status']}."


@pytest.mark.django_db
@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_an_agents_own_note_beside_the_persons_is_answered_once_saying_theirs_stays(api, owner, model, save_mode):
    set_memory(owner, save_mode=save_mode)
    note(owner, "diet", "vegetarian")
    agent = make_agent(owner, memory="mine_and_own")
    proposes(model, VEGAN)

    send(api, new_chat(api, agent=agent.pk), "Remember that I am vegan.")

    [result] = tool_results(model.last_request)
    assert result["users_note_unchanged"] is True and len(model.requests) == 2
    assert index_of(owner) == "- diet: vegetarian\n"


@pytest.mark.django_db(transaction=True)  # the person edits the note in another tab while the model thinks
def test_a_note_that_says_less_than_the_one_edited_meanwhile_waits_for_the_owner_and_is_answered_so(
        api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegan")
    proposes(model, VEGAN, first=lambda call: meanwhile(
        lambda: note(owner, "diet", "vegan, no honey, no eggs"), call))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    told, really = (tool_results(request)[0] for request in model.requests[1:])
    assert told["status"] == "saved"  # the turn read "vegan": an update, saved at once
    assert really["status"] == "proposed"  # it would drop "no eggs" from the note as it is now: asked first
    assert body["reply"] == "The note is proposed." and body["memory"]["saved"] == []
    assert index_of(owner) == "- diet: vegan, no honey, no eggs\n"
    assert Proposal.objects.get(owner=owner).summary == "vegan, no honey"
    assert not ChangeSet.objects.filter(owner=owner, automatic=True).exists()


@pytest.mark.django_db(transaction=True)
def test_a_note_that_no_longer_says_less_after_an_edit_meanwhile_is_saved_at_once_and_answered_so(
        api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegan, no honey, no eggs")
    proposes(model, VEGAN, first=lambda call: meanwhile(lambda: note(owner, "diet", "vegan"), call))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    told, really = (tool_results(request)[0] for request in model.requests[1:])
    assert told["status"] == "proposed" and really["status"] == "saved"
    assert body["reply"] == "The note is saved." and body["memory"]["proposed"] == []
    assert index_of(owner) == "- diet: vegan, no honey\n"
    assert not Proposal.objects.filter(owner=owner).exists()


@pytest.mark.django_db(transaction=True)
def test_under_ask_me_first_a_note_edited_meanwhile_is_answered_once_with_the_proposal_that_waits(
        api, owner, model):
    note(owner, "diet", "vegan")
    proposes(model, VEGAN, first=lambda call: meanwhile(
        lambda: note(owner, "diet", "vegan, no honey, no eggs"), call))

    body = send(api, new_chat(api), "Remember that I am vegan.")

    [result] = tool_results(model.last_request)
    assert len(model.requests) == 2 and body["reply"] == "The note is proposed."
    assert result["proposal_id"] == Proposal.objects.get(owner=owner).pk
