"""A note waiting for a memory add-on says where it goes, and is never saved into an add-on that no longer
serves: "One serves at a time." "Memory does not move to the built-in provider by itself, so a note is never
saved somewhere you did not choose." Picking another provider drops the notes waiting for the add-on left,
and a confirm of one that still waits (made as the switch happened, or before this rule) is refused with 410
``provider_changed`` and dropped; the built-in notes' suggestions stay."""

from __future__ import annotations

import pytest

from localai_memory.memory.models import MemorySettings
from tests.chats.helpers import index_of, new_chat, pick_provider, send, tool_results
from tests.chats.test_forget_meanwhile import meanwhile
from tests.fakes.openai_server import reply, tool_calls

KITE = {"kind": "memory", "topic": "kite", "summary": "flies a red kite"}
INBOX = "/api/chats/memory/proposals"


@pytest.fixture
def sample(owner, monkeypatch):
    import sample_memory_provider

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, {})
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    pick_provider(owner, "sample")
    return sample_memory_provider


def waiting_kite(api, model) -> int:
    model.script(tool_calls(("propose_change", KITE)), reply("It waits for you."))
    [proposed] = send(api, new_chat(api), "Remember that I fly a red kite.")["memory"]["proposed"]
    return proposed["proposal_id"]


@pytest.mark.django_db
def test_a_note_waiting_for_the_addon_says_it_goes_to_the_addon(api, client, owner, model, sample):
    proposal_id = waiting_kite(api, model)

    [shown] = api.get(INBOX).json()["proposals"]
    assert shown["id"] == proposal_id and shown["provider"] == "sample"
    assert shown["scope"]["label"] == "your notes in the memory add-on Sample memory add-on"
    assert (shown["path"], shown["index_path"]) == (None, None)  # not a file of the built-in notes
    client.force_login(owner)
    page = client.get("/inbox/").content.decode()
    assert "Goes to your notes in the memory add-on “Sample memory add-on”" in page
    assert "(no note yet)" not in page and "cannot show them" in page


@pytest.mark.django_db
def test_picking_builtin_drops_the_notes_waiting_for_the_addon_and_their_confirm_saves_nowhere(
        api, client, owner, model, sample):
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    proposal_id = waiting_kite(api, model)
    pick_provider(owner, "builtin")
    # A suggestion for the built-in notes, made while Built-in serves, stays.
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    model.script(tool_calls(("propose_change", {**KITE, "topic": "home", "summary": "lives in Milan"})),
                 reply("It waits."))
    send(api, new_chat(api), "I moved to Milan.")

    assert [p["topic"] for p in api.get(INBOX).json()["proposals"]] == ["home"]
    [dropped] = api.get(INBOX, {"status": "expired"}).json()["proposals"]
    assert dropped["id"] == proposal_id
    assert dropped["message"] == "Dropped: it was for a memory add-on, and you picked another memory provider."
    answer = api.post(f"{INBOX}/{proposal_id}/confirm")
    assert answer.status_code == 410 and answer.json()["error"]["code"] == "provider_changed"
    assert "never saved somewhere you did not choose" in answer.json()["error"]["message"]
    assert sample.NOTES[owner.pk] == {} and "kite" not in index_of(owner)
    client.force_login(owner)
    assert "Dropped: it was for a memory add-on" in client.get("/inbox/").content.decode()


@pytest.mark.django_db
def test_a_note_for_the_addon_still_waiting_after_a_switch_is_refused_at_confirm_and_dropped(
        api, owner, model, sample):
    proposal_id = waiting_kite(api, model)
    # A choice changed without the pick's drop (a row from before it, a race): the confirm checks again.
    MemorySettings.objects.filter(user=owner).update(provider="builtin")

    answer = api.post(f"{INBOX}/{proposal_id}/confirm")

    assert answer.status_code == 410 and answer.json()["error"]["code"] == "provider_changed"
    assert sample.NOTES[owner.pk] == {} and "kite" not in index_of(owner)
    assert api.get(f"{INBOX}/{proposal_id}").json()["status"] == "expired"
    again = api.post(f"{INBOX}/{proposal_id}/confirm")
    assert again.status_code == 410 and again.json()["error"]["code"] == "provider_changed"


@pytest.mark.django_db
def test_turning_memory_off_and_on_keeps_the_addon_and_its_waiting_notes(api, owner, model, sample):
    proposal_id = waiting_kite(api, model)
    pick_provider(owner, "off")
    pick_provider(owner, "sample")

    answer = api.post(f"{INBOX}/{proposal_id}/confirm")

    assert answer.status_code == 200, answer.content
    assert answer.json()["proposal"]["message"] == "Confirmed: handed to the memory add-on \u201cSample memory add-on\u201d."
    assert sample.NOTES[owner.pk] == {"kite": "flies a red kite"}


@pytest.mark.django_db(transaction=True)
def test_a_note_the_model_proposes_as_another_provider_is_picked_does_not_wait_for_the_addon(
        api, owner, model, sample):
    model.script(meanwhile(lambda: pick_provider(owner, "builtin"), tool_calls(("propose_change", KITE))),
                 reply("Nothing waits."))

    body = send(api, new_chat(api), "Remember that I fly a red kite.")

    [result] = tool_results(model.last_request)
    assert (result["status"], result["reason"]) == ("refused", "provider_changed")
    assert body["memory"]["proposed"] == [] and api.get(INBOX).json()["proposals"] == []
