"""The proposals inbox: confirm lands in the right file (audit, Undo), 24 hours of life checked when
confirming, confirming twice saves once, who may answer from a messaging chat, and the outsider's 404s."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from localai_memory.chats.services import Sender, chat_create, turn_run
from localai_memory.core.errors import Conflict, Forbidden, Gone
from localai_memory.memory import policy, proposals
from localai_memory.memory.models import Proposal
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import Scope, channel_key
from localai_memory.notes.services import CapExceeded
from tests.api.conftest import assert_error
from tests.chats.helpers import bot_of, index_of, make_agent, new_chat, note, send, set_memory
from tests.fakes.openai_server import reply, tool_calls
from tests.support.proposals import decided_proposals

pytestmark = pytest.mark.django_db

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey", "details": "Since 2023.\n"}


def proposed_in_chat(api, model, chat: int, change: dict = VEGAN) -> int:
    model.script(tool_calls(("propose_change", change)), reply("I will ask you first."))
    body = send(api, chat, "Remember that I am vegan.")
    return body["memory"]["proposed"][0]["proposal_id"]


def make_proposal(owner, topic: str = "diet", summary: str = "vegan", scope: Scope | None = None, **extra):
    return proposals.proposal_create(owner_id=owner.pk, scope=scope or Scope.user(), topic=topic,
                                     summary=summary, **extra)


def test_a_confirmed_proposal_lands_in_the_agents_file_is_audited_and_undo_restores_the_earlier_bytes(
        api, owner, model):
    agent = make_agent(owner, memory="own")
    scope = Scope.agent(agent.pk)
    note(owner, "diet", "vegetarian", scope=scope, details="Eggs are fine.")
    before_index = index_of(owner, scope)
    before_topic = notes_selectors.topic_text(owner_id=owner.pk, scope=scope, topic="diet")
    proposal_id = proposed_in_chat(api, model, new_chat(api, agent=agent.pk))

    inbox = api.get("/api/chats/memory/proposals").json()["proposals"]
    assert [(p["id"], p["status"], p["path"]) for p in inbox] == [
        (proposal_id, "pending", f"Memory/agents/{agent.pk}/diet.md")]
    assert inbox[0]["current"] == {"summary": "vegetarian", "details": "Eggs are fine.\n"}

    response = api.post(f"/api/chats/memory/proposals/{proposal_id}/confirm")
    assert response.status_code == 200, response.content
    change_id = response.json()["change"]["id"]
    assert response.json()["proposal"]["status"] == "confirmed"
    assert index_of(owner, scope) == "- diet: vegan, no honey -> diet.md\n"
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=scope, topic="diet") == "Since 2023.\n"
    assert index_of(owner) == ""

    audit = api.get("/api/chats/changes/audit").json()["changes"]
    assert audit[0]["id"] == change_id and audit[0]["proposal_id"] == proposal_id
    assert audit[0]["source"] == "proposal" and audit[0]["automatic"] is False

    assert api.post(f"/api/chats/changes/{change_id}/undo").status_code == 200
    assert index_of(owner, scope).encode() == before_index.encode()
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=scope, topic="diet") == before_topic


def test_an_automatic_note_is_in_the_audit_and_its_undo_restores_the_earlier_bytes(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegetarian")
    before = index_of(owner)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    body = send(api, new_chat(api))
    change_id = body["memory"]["saved"][0]["change_id"]
    audit = api.get("/api/chats/changes/audit?automatic=true").json()["changes"]
    assert [c["id"] for c in audit] == [change_id]
    assert api.post(f"/api/chats/changes/{change_id}/undo").status_code == 200
    assert index_of(owner) == before


def test_an_expired_proposal_cannot_be_confirmed_or_rejected(api, owner, model):
    proposal_id = proposed_in_chat(api, model, new_chat(api))
    created = Proposal.objects.get(pk=proposal_id).created_at
    with time_machine.travel(created + timedelta(hours=24, seconds=1), tick=False):
        response = api.post(f"/api/chats/memory/proposals/{proposal_id}/confirm")
        assert response.status_code == 410
        assert response.json()["error"]["code"] == "proposal_expired"
        assert Proposal.objects.get(pk=proposal_id).status == "expired"  # the refused confirm marked it
        assert api.post(f"/api/chats/memory/proposals/{proposal_id}/reject").status_code == 410
        assert api.get("/api/chats/memory/proposals").json()["proposals"] == []
        expired = api.get("/api/chats/memory/proposals?status=expired").json()["proposals"]
        assert [p["id"] for p in expired] == [proposal_id]
    assert Proposal.objects.get(pk=proposal_id).status == "expired"
    assert index_of(owner) == ""


def test_an_unswept_proposal_past_its_life_is_refused_with_the_worker_stopped(owner, db):
    proposal = make_proposal(owner)
    later = proposal.created_at + timedelta(hours=24, seconds=1)
    with time_machine.travel(later, tick=False), pytest.raises(Gone):
        proposals.proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="you")
    assert ChangeSet.objects.count() == 0


def test_a_proposal_can_be_confirmed_just_before_it_expires(api, owner, db):
    proposal = make_proposal(owner)
    with time_machine.travel(proposal.created_at + timedelta(hours=23, minutes=59), tick=False):
        assert api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm").status_code == 200
    assert index_of(owner) == "- diet: vegan\n"


def test_confirming_twice_saves_once_and_the_second_gets_a_409(api, owner, db):
    proposal = make_proposal(owner)
    waiting = api.get("/api/chats/memory/proposals").json()["proposals"][0]
    assert waiting["message"] == policy.MESSAGES[proposal.reason]  # why it waits
    first = api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm")
    second = api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm")
    assert (first.status_code, second.status_code) == (200, 409)
    assert first.json()["proposal"]["message"] == "Confirmed: saved to memory."  # what became of it
    assert second.json()["error"]["code"] == "proposal_decided"
    assert ChangeSet.objects.filter(proposal_id=proposal.pk).count() == 1


def test_confirming_a_proposal_you_dropped_says_it_was_dropped(api, owner, db):
    """A no is "Dropped" (a note to forget "Kept"), the word of the web card, the bots and the terminal."""
    note(owner, "home", "Rome")
    save = make_proposal(owner)
    forget = make_proposal(owner, topic="home", delete=True, summary="")
    answers = [api.post(f"/api/chats/memory/proposals/{proposal.pk}/reject") for proposal in (save, forget)]

    assert [(a.status_code, a.json()["proposal"]["status"], a.json()["proposal"]["message"]) for a in answers] == [
        (200, "rejected", "Dropped: nothing was saved."), (200, "rejected", "Kept: nothing was forgotten.")]

    saved_again = api.post(f"/api/chats/memory/proposals/{save.pk}/confirm")
    forgotten_again = api.post(f"/api/chats/memory/proposals/{forget.pk}/confirm")

    assert assert_error(saved_again, 409, "proposal_decided")["message"] == (
        "This proposal was dropped already: nothing was saved.")
    assert assert_error(forgotten_again, 409, "proposal_decided")["message"] == (
        "This proposal to forget the note was answered already: the note was kept.")
    assert index_of(owner) == "- home: Rome\n"


@pytest.mark.django_db(transaction=True)
def test_two_confirms_racing_save_once(owner):
    proposal = make_proposal(owner)
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def confirm(actor: str) -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(proposals.proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor=actor))
        except Exception as exc:  # noqa: BLE001 - the loser's 409 is the point
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm, args=(name,)) for name in ("tab one", "tab two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    saved = [o for o in outcomes if isinstance(o, ChangeSet)]
    refused = [o for o in outcomes if isinstance(o, Conflict)]
    assert len(saved) == 1 and len(refused) == 1, outcomes
    assert refused[0].status == 409
    assert ChangeSet.objects.filter(proposal_id=proposal.pk).count() == 1
    assert index_of(owner) == "- diet: vegan\n"


def test_a_note_edited_after_the_proposal_is_not_overwritten_by_a_confirm_made_without_seeing_it(api, owner, db):
    """The inbox showed "lives in Rome" → "lives in Turin"; meanwhile the owner wrote "lives in Naples". The
    first confirm refuses (409 changed_since) and the proposal shows the note as it is; confirming again,
    having seen it, saves the suggestion, and its Undo gives Naples back."""
    note(owner, "home", "lives in Rome")
    proposal = make_proposal(owner, topic="home", summary="lives in Turin")
    note(owner, "home", "lives in Naples", details="Via Napoli 2.")
    url = f"/api/chats/memory/proposals/{proposal.pk}/confirm"
    refused = api.post(url)
    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "changed_since" and "lives in Naples" in error["message"]
    assert error["details"]["current"] == {"summary": "lives in Naples", "details": "Via Napoli 2.\n"}
    assert index_of(owner) == "- home: lives in Naples -> home.md\n"
    waiting = api.get("/api/chats/memory/proposals").json()["proposals"]
    assert [p["current"]["summary"] for p in waiting if p["id"] == proposal.pk] == ["lives in Naples"]
    saved = api.post(url)
    assert saved.status_code == 200, saved.content
    assert index_of(owner) == "- home: lives in Turin -> home.md\n"  # a line alone keeps the details
    assert api.post(f"/api/chats/changes/{saved.json()['change']['id']}/undo").status_code == 200
    assert index_of(owner) == "- home: lives in Naples -> home.md\n"


def test_a_line_written_long_in_files_after_the_proposal_is_shown_and_then_replaced(api, owner, db):
    """An index line edited in Files may be longer than the 200 characters the store writes."""
    note(owner, "home", "lives in Rome")
    proposal = make_proposal(owner, topic="home", summary="lives in Turin")
    long_line = "lives in Naples, " + "near the sea " * 30
    written = api.put("/api/files/content?path=Memory/index.md",
                      {"content": f"- home: {long_line.strip()}\n", "version": 1}, format="json")
    assert written.status_code == 200, written.content
    url = f"/api/chats/memory/proposals/{proposal.pk}/confirm"
    assert api.post(url).json()["error"]["code"] == "changed_since"
    assert api.get("/api/chats/memory/proposals").json()["proposals"][0]["current"]["summary"] == long_line.strip()
    assert api.post(url).status_code == 200
    assert index_of(owner) == "- home: lives in Turin\n"
    proposal.refresh_from_db()
    assert proposal.old_summary == "lives in Rome"  # what it was proposed over is kept (consolidation reads it)


def test_the_same_suggestion_made_again_after_an_edit_shows_the_note_as_it_is_now(api, owner, db):
    note(owner, "home", "lives in Rome")
    first = make_proposal(owner, topic="home", summary="lives in Turin")
    note(owner, "home", "lives in Naples")
    again = make_proposal(owner, topic="home", summary="lives in Turin")  # the model asks the same again
    assert again.pk == first.pk
    card = api.get("/api/chats/memory/proposals").json()["proposals"][0]
    assert card["current"]["summary"] == "lives in Naples"  # what the person sees beside it
    assert api.post(f"/api/chats/memory/proposals/{first.pk}/confirm").status_code == 200
    assert index_of(owner) == "- home: lives in Turin\n"


def test_a_forget_suggestion_does_not_delete_a_note_written_since(api, owner, db):
    note(owner, "diet", "vegan")
    proposal = make_proposal(owner, delete=True, summary="")
    note(owner, "diet", "vegetarian now")
    assert api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm").json()["error"]["code"] == "changed_since"
    assert index_of(owner) == "- diet: vegetarian now\n"
    note(owner, "home", "Rome")
    gone = make_proposal(owner, topic="home", delete=True, summary="")
    note_delete = api.delete("/api/chats/memory/notes?topic=home")
    assert note_delete.status_code == 200
    assert api.post(f"/api/chats/memory/proposals/{gone.pk}/confirm").status_code == 200  # gone already: fine


def test_a_rejected_proposal_writes_nothing_and_cannot_be_confirmed(api, owner, db):
    proposal = make_proposal(owner)
    response = api.post(f"/api/chats/memory/proposals/{proposal.pk}/reject")
    assert response.status_code == 200 and response.json()["proposal"]["status"] == "rejected"
    assert api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm").status_code == 409
    assert index_of(owner) == "" and ChangeSet.objects.count() == 0


def test_a_proposal_to_forget_removes_the_line_once_confirmed(api, owner, db):
    note(owner, "diet", "vegan")
    note(owner, "home", "Rome")
    proposal = make_proposal(owner, delete=True, summary="")
    api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm")
    assert index_of(owner) == "- home: Rome\n"


def test_confirming_into_a_full_index_is_a_422_and_the_proposal_keeps_waiting(api, owner, db):
    proposal = make_proposal(owner)
    for n in range(40):
        note(owner, f"t{n}", "x")
    response = api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm")
    assert response.status_code == 422
    assert len(response.json()["error"]["details"]["entries"]) == 40
    assert Proposal.objects.get(pk=proposal.pk).status == "pending"


def test_the_inbox_is_read_page_by_page_to_the_last_one(api, owner, outsider_api):
    """As the audit of changes: ``limit`` at a time, ``next_before`` reads the next page, null on the last."""
    made = decided_proposals(owner, 7)
    seen, before, pages = [], None, 0
    while True:
        query = {"status": "all", "limit": 3, **({"before": before} if before is not None else {})}
        body = api.get("/api/chats/memory/proposals", query).json()
        seen += [p["id"] for p in body["proposals"]]
        pages += 1
        before = body["next_before"]
        if before is None:
            break
    assert seen == made and pages == 3


def test_the_inbox_says_when_there_are_more_than_one_page_holds(api, owner):
    """Left out, ``limit`` is the 500 the inbox always listed at most; what lies beyond is no longer lost."""
    made = decided_proposals(owner, 501)
    first = api.get("/api/chats/memory/proposals", {"status": "all"}).json()
    assert [p["id"] for p in first["proposals"]] == made[:500] and first["next_before"] == made[499]
    rest = api.get("/api/chats/memory/proposals", {"status": "all", "before": first["next_before"]}).json()
    assert [p["id"] for p in rest["proposals"]] == made[500:] and rest["next_before"] is None
    pending = api.get("/api/chats/memory/proposals").json()
    assert pending == {"proposals": [], "next_before": None}


def test_a_cursor_that_is_not_one_of_your_proposals_is_a_400_not_an_empty_page(api, outsider_api, owner):
    made = decided_proposals(owner, 2)
    for client, before in ((api, made[0] + 1000), (outsider_api, made[0])):
        assert_error(client.get("/api/chats/memory/proposals", {"status": "all", "before": before}), 400,
                     "invalid_before")


@pytest.mark.parametrize("limit", ["0", "501", "ten"])
def test_a_limit_out_of_range_is_a_400(api, owner, limit):
    assert_error(api.get("/api/chats/memory/proposals", {"limit": limit}), 400, "invalid_limit")


def test_the_inbox_refuses_an_unknown_status(api, db):
    response = api.get("/api/chats/memory/proposals?status=maybe")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_status"


def test_a_proposal_already_said_by_the_index_is_not_made(owner, db):
    note(owner, "diet", "vegan")
    with pytest.raises(proposals.AlreadySaved):
        make_proposal(owner)
    assert Proposal.objects.count() == 0


def test_a_proposal_is_made_again_after_the_identical_one_expired(owner, db):
    first = make_proposal(owner)
    with time_machine.travel(first.created_at + timedelta(hours=25), tick=False):
        second = make_proposal(owner)
    assert second.pk != first.pk and second.duplicate is False
    assert Proposal.objects.get(pk=first.pk).status == "expired"


# --------------------------------------------------------------------------------------------------------
# Answers from a messaging chat
# --------------------------------------------------------------------------------------------------------

BOB = Sender(sender_id=11, display="Bob", paired=True, can_confirm=True)
CAROL = Sender(sender_id=12, display="Carol", paired=True, can_confirm=True)
EVE = Sender(sender_id=13, display="Eve", paired=True, can_confirm=False)


def messaging_proposal(owner, model, sender: Sender = BOB) -> Proposal:
    chat = chat_create(owner_id=owner.pk, origin="messaging", binding_id=bot_of(owner),
                       conversation_key=channel_key(bot_of(owner), "group-9"), one_to_one=False)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Reply yes to save it or no to drop it."))
    result = turn_run(chat=chat, content="Remember I am vegan", sender=sender)
    return Proposal.objects.get(pk=result.memory["proposed"][0]["proposal_id"])


def test_a_sender_without_the_confirm_permission_cannot_answer(owner, model):
    proposal = messaging_proposal(owner, model)
    with pytest.raises(Forbidden):
        proposals.proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="Eve", sender=EVE)
    assert Proposal.objects.get(pk=proposal.pk).status == "pending"
    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="Carol", sender=CAROL)
    assert index_of(owner, Scope("channel", channel_key(bot_of(owner), "group-9"))) == \
        "- diet: vegan, no honey -> diet.md\n"


def test_under_always_confirm_only_the_paired_sender_who_asked_can_answer(owner, model):
    set_memory(owner, save_mode="always")
    proposal = messaging_proposal(owner, model)
    assert proposal.locked
    with pytest.raises(Forbidden):
        proposals.proposal_reject(owner_id=owner.pk, proposal_id=proposal.pk, actor="Carol", sender=CAROL)
    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="Bob", sender=BOB)
    assert Proposal.objects.get(pk=proposal.pk).status == "confirmed"


def test_the_owner_can_confirm_in_the_inbox_what_a_sender_could_not(api, owner, model):
    set_memory(owner, save_mode="always")
    proposal = messaging_proposal(owner, model)
    assert api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm").status_code == 200


# --------------------------------------------------------------------------------------------------------
# Another user
# --------------------------------------------------------------------------------------------------------


def test_a_second_user_gets_a_404_on_every_proposal_and_change_of_the_first(api, outsider_api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    change_id = send(api, chat)["memory"]["saved"][0]["change_id"]
    proposal = make_proposal(owner, topic="home", summary="Rome")
    calls = [
        outsider_api.get(f"/api/chats/memory/proposals/{proposal.pk}"),
        outsider_api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm"),
        outsider_api.post(f"/api/chats/memory/proposals/{proposal.pk}/reject"),
        outsider_api.post(f"/api/chats/changes/{change_id}/undo"),
    ]
    assert [c.status_code for c in calls] == [404] * len(calls)
    assert outsider_api.get("/api/chats/memory/proposals?status=all").json()["proposals"] == []
    assert change_id not in [c["id"] for c in outsider_api.get("/api/chats/changes/audit").json()["changes"]]
    assert Proposal.objects.get(pk=proposal.pk).status == "pending"
    assert index_of(owner) == "- diet: vegan, no honey -> diet.md\n"


def test_the_sweep_marks_expired_proposals_and_tells_each_listener_once(owner, db):
    due = make_proposal(owner)
    with time_machine.travel(due.created_at + timedelta(hours=23), tick=False):
        fresh = make_proposal(owner, topic="home", summary="Rome")
    heard: list[int] = []
    proposals.expiry_listeners.append(lambda p: heard.append(p.pk))
    try:
        with time_machine.travel(due.created_at + timedelta(hours=24, seconds=1), tick=False):
            assert [p.pk for p in proposals.proposals_expire_due()] == [due.pk]
            proposals.proposals_notify_expired()
            proposals.proposals_notify_expired()
    finally:
        proposals.expiry_listeners.pop()
    assert heard == [due.pk]
    assert Proposal.objects.get(pk=due.pk).status == "expired"
    assert Proposal.objects.get(pk=fresh.pk).status == "pending"


def test_a_listener_that_failed_hears_of_the_expiry_at_the_next_sweep(owner, db):
    proposal = make_proposal(owner)
    attempts: list[int] = []

    def flaky(p: Proposal) -> None:
        attempts.append(p.pk)
        if len(attempts) == 1:
            raise RuntimeError("bot offline")

    proposals.expiry_listeners.append(flaky)
    try:
        with time_machine.travel(proposal.created_at + timedelta(hours=25), tick=False):
            proposals.proposals_expire_due()
            assert proposals.proposals_notify_expired() == []
            assert [p.pk for p in proposals.proposals_notify_expired()] == [proposal.pk]
    finally:
        proposals.expiry_listeners.remove(flaky)
    assert attempts == [proposal.pk, proposal.pk]


def test_the_sweep_announces_undo_windows_that_closed(api, owner, model):
    set_memory(owner, save_mode="auto")
    model.script(tool_calls(("propose_change", VEGAN)), reply("Saved."))
    change_id = send(api, new_chat(api))["memory"]["saved"][0]["change_id"]
    start = timezone.now()
    closed: list[int] = []
    proposals.undo_closed_listeners.append(lambda c: closed.append(c.pk))
    try:
        proposals.undo_windows_closed(since=start, until=start + timedelta(minutes=29))
        proposals.undo_windows_closed(since=start + timedelta(minutes=29), until=start + timedelta(minutes=31))
    finally:
        proposals.undo_closed_listeners.pop()
    assert closed == [change_id]


def test_a_cap_is_checked_when_proposing(owner, db):
    for n in range(40):
        note(owner, f"t{n}", "x")
    with pytest.raises(CapExceeded):
        make_proposal(owner)


def test_a_note_added_on_the_memory_tab_takes_its_topic_though_a_suggestion_for_the_addon_has_it(owner, monkeypatch):
    """A suggestion waiting for a memory add-on goes to the add-on's notes: it does not take the topic of a
    built-in note the owner adds meanwhile (the Memory tab works whatever serves), which would be named
    ``garden-tomatoes-2`` for nothing, nor does it show as waiting on that note."""
    from django.test import Client

    from localai_memory.chats.remember import note_add
    from localai_memory.memory.services import provider_pick

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    provider_pick(user_id=owner.pk, provider="sample")
    proposals.addon_proposal_create(owner_id=owner.pk, provider="sample", topic="garden-tomatoes",
                                    summary="grows tomatoes")

    _change, topic = note_add(owner_id=owner.pk, scope=Scope.user(), summary="Garden tomatoes",
                              source="files")

    assert topic == "garden-tomatoes"
    assert "- garden-tomatoes: Garden tomatoes" in index_of(owner)
    browser = Client()
    browser.force_login(owner)
    tab = browser.get("/settings/memory/").content.decode()
    assert "Garden tomatoes" in tab and "note-waiting" not in tab



@pytest.fixture
def kite_for_the_addon(owner, monkeypatch) -> Proposal:
    """A suggestion waiting for the sample memory add-on, which serves the owner's memory (running, empty)."""
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN", raising=False)
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, {})
    provider_pick(user_id=owner.pk, provider="sample")
    return proposals.addon_proposal_create(owner_id=owner.pk, provider="sample", topic="kite",
                                           summary="flies a red kite")


def test_a_note_confirmed_for_a_memory_addon_is_in_the_audit_and_says_it_cannot_be_undone(api, owner, kite_for_the_addon):
    """The audit of changes holds every confirmed change, a note handed to an add-on too: who confirmed it,
    what went, to which add-on. The add-on keeps it, so its Undo is refused rather than pretending."""
    import sample_memory_provider
    from django.test import Client

    waiting = kite_for_the_addon

    assert api.post(f"/api/chats/memory/proposals/{waiting.pk}/confirm").status_code == 200

    assert sample_memory_provider.NOTES[owner.pk] == {"kite": "flies a red kite"}
    [entry] = api.get("/api/chats/changes/audit").json()["changes"]
    assert entry["source"] == "addon" and entry["proposal_id"] == waiting.pk and entry["files"] == []
    assert entry["summary"] == "Handed to the memory add-on “Sample memory add-on” (sample): kite: flies a red kite"
    assert entry["actor"] and entry["undoable"] is False
    undo = api.post(f"/api/chats/changes/{entry['id']}/undo")
    assert_error(undo, 409, "not_undoable")
    assert sample_memory_provider.NOTES[owner.pk] == {"kite": "flies a red kite"}
    assert [c["source"] for c in api.get("/api/chats/changes/audit").json()["changes"]] == ["addon"]
    browser = Client()
    browser.force_login(owner)
    tab = browser.get("/settings/memory/").content.decode()
    assert "Notes handed to memory add-ons" in tab
    assert "Handed to the memory add-on “Sample memory add-on” (sample): kite: flies a red kite" in tab


def test_a_note_handed_to_a_memory_addon_for_an_agent_names_the_agent_in_the_audit(api, owner, monkeypatch):
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    provider_pick(user_id=owner.pk, provider="sample")
    agent = make_agent(owner, memory="own")
    waiting = proposals.addon_proposal_create(owner_id=owner.pk, provider="sample", topic="recipe",
                                              summary="knows risotto", scope=Scope.agent(agent.pk))

    assert api.post(f"/api/chats/memory/proposals/{waiting.pk}/confirm").status_code == 200

    [entry] = api.get("/api/chats/changes/audit").json()["changes"]
    assert entry["summary"] == ("Handed to the memory add-on “Sample memory add-on” (sample) (agent “Chef”): "
                                "recipe: knows risotto")


def test_an_addon_note_confirmed_from_the_inbox_without_script_says_it_was_handed_to_the_addon(owner, kite_for_the_addon):
    """Its card says so; the page's message said "Saved to memory", where the host keeps nothing of it."""
    import sample_memory_provider
    from django.test import Client

    waiting = kite_for_the_addon
    browser = Client()
    browser.force_login(owner)

    page = browser.post(f"/inbox/{waiting.pk}/confirm/", follow=True).content.decode()

    assert "Handed to the memory add-on “Sample memory add-on”: kite." in page
    assert "Saved to memory" not in page
    assert sample_memory_provider.NOTES[owner.pk] == {"kite": "flies a red kite"}


def test_an_addon_note_to_forget_confirmed_from_the_inbox_without_script_says_it_was_handed_to_be_forgotten(
        owner, monkeypatch):
    """Its card says "Handed to the memory add-on to forget"; the page's message said only "Handed to the memory
    add-on", as for a note given to it to keep."""
    import sample_memory_provider
    from django.test import Client

    from localai_memory.memory.services import provider_pick

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN", raising=False)
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, {"kite": "flies a red kite"})
    provider_pick(user_id=owner.pk, provider="sample")
    waiting = proposals.addon_proposal_create(owner_id=owner.pk, provider="sample", topic="kite", delete=True)
    browser = Client()
    browser.force_login(owner)

    page = browser.post(f"/inbox/{waiting.pk}/confirm/", follow=True).content.decode()

    assert "Handed to the memory add-on “Sample memory add-on” to forget: kite." in page
    assert sample_memory_provider.NOTES[owner.pk] == {}
