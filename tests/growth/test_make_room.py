"""A full index: the pass suggests forgetting the note the model saved longest ago (a month or more, unchanged
since), never one a person wrote; the owner decides, and Undo brings it back."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.growth.consolidation import EPISODES_TOPIC, consolidate_user
from localai_memory.growth.models import ChatWatermark
from localai_memory.memory import policy, proposals
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import NoteFile
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope
from tests.fakes.openai_server import reply

from .conftest import fact, facts_reply

pytestmark = pytest.mark.django_db

LISBON = "I moved to Lisbon last month and I only eat vegetarian food."


def write(owner, topic: str, summary: str, *, source: str, days_ago: int = 0, details: str | None = None) -> None:
    with time_machine.travel(timezone.now() - timedelta(days=days_ago), tick=False):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=topic, summary=summary,
                                   details=details, source=source, actor="you" if source == "files" else "model")


def edit_details(owner, topic: str, details: str, *, days_ago: int = 0) -> None:
    """A person edits only the topic file on the Files page; the index line stays as it is."""
    path = Scope.user().topic_path(topic)
    version = NoteFile.objects.get(owner=owner, path=path).version
    with time_machine.travel(timezone.now() - timedelta(days=days_ago), tick=False):
        notes_services.file_write(owner_id=owner.pk, path=path, content=details, version=version)


def fill(owner, model_notes: dict[str, int], *, details: bool = False) -> None:
    """A full index: the model's notes (topic: days ago; with a topic file if ``details``) and the person's
    own for the rest."""
    for topic, days_ago in model_notes.items():
        write(owner, topic, f"the model's guess about {topic}", source="model", days_ago=days_ago,
              details=f"Why the model thinks so about {topic}." if details else None)
    for n in range(INDEX_MAX_LINES - len(model_notes)):
        write(owner, f"typed-{n:02d}", f"something I typed, number {n}", source="files", days_ago=90)


def suggestions(owner) -> list[Proposal]:
    return list(Proposal.objects.filter(owner=owner, status=Proposal.Status.PENDING).order_by("id"))


def index(owner) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())


def room_for_lisbon(owner, model, make_chat, *, model_notes: dict[str, int] | None = None,
                    save_mode: str | None = None) -> Proposal:
    """A full index (``model_notes``: the model's notes and their age, else one old guess), the save level
    ``save_mode`` if given, a chat that says the owner moved to Lisbon, and the pass's one suggestion: forget
    the model's oldest guess to make room for "home"."""
    fill(owner, model_notes or {"old-guess": 45})
    if save_mode is not None:
        settings_update(user_id=owner.pk, save_mode=save_mode)
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)
    [room] = suggestions(owner)
    return room


def test_a_full_index_gets_a_suggestion_to_forget_the_oldest_note_of_the_model(owner, model, make_chat):
    fill(owner, {"old-guess": 45, "older-guess": 60, "fresh-guess": 5})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    result = consolidate_user(owner_id=owner.pk)

    [suggestion] = suggestions(owner)
    assert (suggestion.topic, suggestion.is_delete, suggestion.reason) == ("older-guess", True, "make_room")
    assert suggestion.old_summary == "the model's guess about older-guess"
    assert {"topic": "home", "reason": "cap_exceeded"} in result.refused  # the new fact did not fit
    assert "These notes are full" in policy.MESSAGES[suggestion.reason]
    assert "- older-guess:" in index(owner)  # nothing is forgotten until the owner says so

    change = proposals.proposal_confirm(owner_id=owner.pk, proposal_id=suggestion.pk, actor="you")
    assert "- older-guess:" not in index(owner) and "- old-guess:" in index(owner)

    notes_services.change_undo(owner_id=owner.pk, change_id=change.pk)
    assert "- older-guess: the model's guess about older-guess" in index(owner)


def test_the_owners_weighing_decides_which_note_of_the_model_is_offered_first(owner, model, make_chat):
    fill(owner, {"old-guess": 45, "older-guess": 60, "weighed-less": 35})
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="older-guess", importance=0.9)
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="weighed-less", importance=0.1)
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    consolidate_user(owner_id=owner.pk)

    # "older-guess" is the oldest, but its owner gave it more weight than the model's own (0.4): never
    # offered; "weighed-less" is the youngest, but weighed less: first.
    [suggestion] = suggestions(owner)
    assert (suggestion.topic, suggestion.reason) == ("weighed-less", "make_room")
    proposals.proposal_reject(owner_id=owner.pk, proposal_id=suggestion.pk, actor="you")
    make_chat(owner, "Still in Lisbon, and still vegetarian.")
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)
    assert [p.topic for p in suggestions(owner)] == ["old-guess"]


def test_a_note_of_the_model_that_turns_still_show_is_not_offered(owner, model, make_chat):
    from localai_memory.recall.service import notes_used

    fill(owner, {"old-guess": 45, "older-guess": 60})
    notes_used(owner_id=owner.pk, notes=[("user", "", "older-guess")], now=timezone.now() - timedelta(days=3))
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    consolidate_user(owner_id=owner.pk)

    assert [p.topic for p in suggestions(owner)] == ["old-guess"]  # the older one was shown three days ago


def test_the_inbox_says_why_the_note_should_go(owner, model, make_chat, client):
    fill(owner, {"old-guess": 45})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)

    client.force_login(owner)
    page = client.get("/inbox/").content.decode()
    assert "Forget the note “old-guess”?" in page
    assert "These notes are full" in page and "Undo brings it back" in page


def test_notes_a_person_wrote_or_the_model_wrote_lately_are_never_suggested(owner, model, make_chat):
    fill(owner, {"fresh-guess": 12, EPISODES_TOPIC: 90})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    result = consolidate_user(owner_id=owner.pk)

    assert suggestions(owner) == []
    assert {"topic": "home", "reason": "cap_exceeded"} in result.refused


def test_a_model_note_whose_details_a_person_edited_is_not_suggested_but_the_next_oldest_is(owner, model,
                                                                                            make_chat):
    fill(owner, {"old-guess": 45, "older-guess": 60}, details=True)
    edit_details(owner, "older-guess", "What I know better: the real reasons.", days_ago=40)
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    consolidate_user(owner_id=owner.pk)

    [suggestion] = suggestions(owner)
    assert (suggestion.topic, suggestion.reason) == ("old-guess", "make_room")


def test_a_model_note_whose_details_a_person_edited_lately_is_not_suggested(owner, model, make_chat):
    fill(owner, {"old-guess": 45}, details=True)
    edit_details(owner, "old-guess", "What I know better.", days_ago=3)
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    result = consolidate_user(owner_id=owner.pk)

    assert suggestions(owner) == []
    assert {"topic": "home", "reason": "cap_exceeded"} in result.refused
    assert "- old-guess: the model's guess about old-guess -> old-guess.md" in index(owner)


def test_one_suggestion_waits_at_a_time_and_one_turned_down_is_not_made_again(owner, model, make_chat):
    fill(owner, {"old-guess": 45, "older-guess": 60})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    consolidate_user(owner_id=owner.pk)
    [first] = suggestions(owner)

    make_chat(owner, "I started learning the cello.")
    model.script(reply(facts_reply(fact("music", "learns the cello"))))
    consolidate_user(owner_id=owner.pk)
    assert suggestions(owner) == [first]  # still the one waiting

    proposals.proposal_reject(owner_id=owner.pk, proposal_id=first.pk, actor="you")
    make_chat(owner, "I also play chess on Sundays.")
    model.script(reply(facts_reply(fact("chess", "plays chess on Sundays"))))
    consolidate_user(owner_id=owner.pk)
    [second] = suggestions(owner)
    assert (second.topic, second.reason) == ("old-guess", "make_room")  # the next one, not the refused one


def test_under_never_nothing_is_suggested(owner, model, make_chat):
    fill(owner, {"old-guess": 45})
    settings_update(user_id=owner.pk, save_mode="never")
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    consolidate_user(owner_id=owner.pk)

    assert suggestions(owner) == []


# --- Under Always confirm ---------------------------------------------------------------------------------


def test_under_always_confirm_the_suggestion_is_locked_and_still_says_why(owner, model, make_chat, client):
    suggestion = room_for_lisbon(owner, model, make_chat, model_notes={"old-guess": 45, "older-guess": 60},
                                 save_mode="always")

    assert (suggestion.topic, suggestion.reason, suggestion.locked) == ("older-guess", "make_room", True)
    client.force_login(owner)
    page = client.get("/inbox/").content.decode()
    assert "These notes are full" in page and "Always confirm" in page


def test_under_always_confirm_one_suggestion_waits_at_a_time(owner, model, make_chat):
    first = room_for_lisbon(owner, model, make_chat, model_notes={"old-guess": 45, "older-guess": 60},
                            save_mode="always")

    make_chat(owner, "I started learning the cello.")
    model.script(reply(facts_reply(fact("music", "learns the cello"))))
    consolidate_user(owner_id=owner.pk)

    assert suggestions(owner) == [first]


# --- The note that needed the room --------------------------------------------------------------------------


def test_the_suggestion_says_what_it_makes_room_for_in_the_inbox_and_the_api(owner, model, make_chat, client,
                                                                               api, outsider_api):
    fill(owner, {"old-guess": 45})
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon", details="Moved in March."))))
    consolidate_user(owner_id=owner.pk)
    [suggestion] = suggestions(owner)

    client.force_login(owner)
    page = client.get("/inbox/").content.decode()
    assert "It makes room for the note “home”: <span dir=\"auto\">lives in Lisbon</span>." in page
    body = api.get(f"/api/chats/memory/proposals/{suggestion.pk}").json()
    assert body["makes_room_for"] == {"topic": "home", "summary": "lives in Lisbon", "details": "Moved in March."}
    assert body["reason"] == "make_room" and body["delete"] is True  # the fields it had stay as they were
    assert outsider_api.get(f"/api/chats/memory/proposals/{suggestion.pk}").status_code == 404


def test_confirming_the_room_suggests_the_note_that_did_not_fit_and_saves_nothing_more(owner, model, make_chat):
    fill(owner, {"old-guess": 45})
    chat = make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon", details="Moved in March."))))
    consolidate_user(owner_id=owner.pk)
    [room] = suggestions(owner)

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [home] = suggestions(owner)
    assert (home.topic, home.summary, home.details, home.is_delete) == ("home", "lives in Lisbon", "Moved in March.\n",
                                                                      False)
    assert (home.source, home.origin, home.chat_id, home.reason) == ("consolidation", "job", chat.pk, "ask_first")
    assert "- home:" not in index(owner) and "- old-guess:" not in index(owner)  # waits for the owner

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=home.pk, actor="you")
    assert "- home: lives in Lisbon" in index(owner)


def test_a_fact_in_another_script_that_did_not_fit_takes_a_free_topic_once_the_room_is_made(owner, model,
                                                                                             make_chat):
    """A fact no topic can be made of (Russian) was to be "note", free when the pass ran; meanwhile the person
    named a note of their own "note" on the Files page. The fact comes under a topic free now, never as a
    change of the person's note."""
    fill(owner, {"old-guess": 45})
    make_chat(owner, "Я переехал в Рим.")
    model.script(reply(facts_reply(fact("дом", "Живёт в Риме"))))
    consolidate_user(owner_id=owner.pk)
    [room] = suggestions(owner)
    assert room.makes_room_for["topic"] == "note"
    index_file = NoteFile.objects.get(owner=owner, path=Scope.user().index_path)
    notes_services.file_write(owner_id=owner.pk, path=index_file.path, version=index_file.version,
                              content=index_file.content.replace("- typed-00: something I typed, number 0",
                                                                 "- note: likes jazz"))

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [rome] = suggestions(owner)
    assert (rome.topic, rome.summary, rome.old_summary, rome.is_delete) == ("note-2", "Живёт в Риме", "", False)
    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=rome.pk, actor="you")
    assert "- note: likes jazz" in index(owner) and "- note-2: Живёт в Риме" in index(owner)


def test_under_save_it_and_tell_me_the_note_still_waits(owner, model, make_chat):
    settings_update(user_id=owner.pk, save_mode="auto")
    room = room_for_lisbon(owner, model, make_chat)

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [home] = suggestions(owner)
    assert (home.topic, home.reason) == ("home", "scheduled_run")  # a run that started by itself never saves
    assert "- home:" not in index(owner)


def test_under_always_confirm_the_note_that_did_not_fit_waits_locked(owner, model, make_chat):
    settings_update(user_id=owner.pk, save_mode="always")
    room = room_for_lisbon(owner, model, make_chat)

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [home] = suggestions(owner)
    assert (home.topic, home.reason, home.locked) == ("home", "always_confirm", True)


def test_turning_the_room_down_drops_the_note_that_needed_it(owner, model, make_chat):
    room = room_for_lisbon(owner, model, make_chat)

    proposals.proposal_reject(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    assert suggestions(owner) == []
    assert not Proposal.objects.filter(owner=owner, topic="home").exists()


def test_a_note_the_rules_now_refuse_is_not_suggested_when_the_room_is_made(owner, model, make_chat):
    room = room_for_lisbon(owner, model, make_chat)
    settings_update(user_id=owner.pk, save_mode="never")

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    assert "- old-guess:" not in index(owner)  # the owner's confirm stands
    assert suggestions(owner) == []


def test_a_note_still_too_big_comes_with_the_next_room_suggestion(owner, model, make_chat):
    # By size, not by lines: 37 typed lines and two of the model's, 50 bytes each, make 1950 of 2048 bytes,
    # and the new line of 189 bytes fits only once both of the model's notes are gone.
    for topic, days_ago in {"old-guess": 45, "older-guess": 60}.items():
        write(owner, topic, f"a guess about {topic}".ljust(50 - len(f"- {topic}: ") - 1, "."),
              source="model", days_ago=days_ago)
    for n in range(37):
        write(owner, f"typed-{n:02d}", f"something I typed, number {n:02d}".ljust(50 - 13, "."), source="files",
              days_ago=90)
    assert len(index(owner).encode()) == 1950
    long = ("lives in Lisbon" + ", near the river" * 15)[:180]
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", long))))
    consolidate_user(owner_id=owner.pk)
    [first] = suggestions(owner)
    assert first.topic == "older-guess"

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=first.pk, actor="you")
    [second] = suggestions(owner)
    assert (second.topic, second.reason, second.makes_room_for["topic"]) == ("old-guess", "make_room", "home")

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=second.pk, actor="you")
    [home] = suggestions(owner)
    assert (home.topic, home.summary) == ("home", long)


def test_the_summary_of_chats_that_did_not_fit_is_suggested_once_the_room_is_made(owner, model, make_chat):
    fill(owner, {"old-guess": 45})
    chat = make_chat(owner, "Help me plan a weekend trip to Porto with trains and museums.", ago=timedelta(hours=2))
    model.script(reply(facts_reply(summary="Planned a weekend trip to Porto")))
    consolidate_user(owner_id=owner.pk)
    [room] = suggestions(owner)
    assert room.makes_room_for["topic"] == EPISODES_TOPIC
    assert ChatWatermark.objects.get(chat=chat).summary_outcome == "waits_for_room"

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [episode] = suggestions(owner)
    assert episode.topic == EPISODES_TOPIC and episode.details.endswith(": Planned a weekend trip to Porto\n")


def test_chats_summarised_meanwhile_are_kept_when_the_room_is_made(owner, model, make_chat):
    """The kept summary goes into recent-chats as the file is when the room is made, not as it was."""
    fill(owner, {"old-guess": 45})
    make_chat(owner, "Help me plan a weekend trip to Porto with trains and museums.", ago=timedelta(hours=2))
    model.script(reply(facts_reply(summary="Planned a weekend trip to Porto")))
    consolidate_user(owner_id=owner.pk)
    [room] = suggestions(owner)
    # Meanwhile the owner made room by hand and keeps a line of their own in recent-chats.
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="typed-00", delete=True, source="files")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=EPISODES_TOPIC,
                               summary="what recent chats were about", details="- 2026-01-02: Sorted my taxes\n",
                               source="files")

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [episode] = suggestions(owner)
    lines = episode.details.splitlines()
    assert lines[0].endswith(": Planned a weekend trip to Porto") and lines[1] == "- 2026-01-02: Sorted my taxes"


def test_a_recent_chats_suggestion_made_meanwhile_gives_its_lines_to_the_one_the_room_brings(owner, model, make_chat,
                                                                                            client):
    """Room made for one chat's summary while a pass suggested another chat's: one suggestion holds both, the
    earlier steps aside, and saving it keeps both lines, whatever the order of the answers."""
    fill(owner, {"old-guess": 45})
    make_chat(owner, "Help me plan a weekend trip to Porto with trains and museums.", ago=timedelta(hours=3))
    model.script(reply(facts_reply(summary="Planned a weekend trip to Porto")))
    consolidate_user(owner_id=owner.pk)
    [room] = suggestions(owner)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="typed-00", delete=True, source="files")
    make_chat(owner, "Which tent should I buy for two nights in the Alps in June?", ago=timedelta(hours=2))
    model.script(reply(facts_reply(summary="Chose a tent for the Alps")))
    consolidate_user(owner_id=owner.pk)
    [_, alps] = suggestions(owner)
    assert alps.topic == EPISODES_TOPIC and "Porto" not in alps.details

    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=room.pk, actor="you")

    [both] = suggestions(owner)
    assert both.topic == EPISODES_TOPIC
    assert ": Planned a weekend trip to Porto" in both.details and ": Chose a tent for the Alps" in both.details
    alps.refresh_from_db()
    assert (alps.status, alps.decided_by) == ("expired", "replaced by a newer suggestion")
    client.force_login(owner)
    assert "Replaced by a newer suggestion that holds these lines too." in client.get("/inbox/").content.decode()
    proposals.proposal_confirm(owner_id=owner.pk, proposal_id=both.pk, actor="you")
    saved = notes_selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic=EPISODES_TOPIC)
    assert "Planned a weekend trip to Porto" in saved and "Chose a tent for the Alps" in saved


def test_a_recent_chats_file_the_owner_filled_with_their_own_lines_ends_the_pass_cleanly(owner, model, make_chat):
    own = "".join(f"- my own line {n:03d}: {'x' * 60}\n" for n in range(102))  # 8,160 bytes of the owner's lines
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=EPISODES_TOPIC,
                               summary="what recent chats were about", details=own, source="files")
    chat = make_chat(owner, "Help me plan a weekend trip to Porto with trains and museums.", ago=timedelta(hours=2))
    model.script(reply(facts_reply(summary="Planned a weekend trip to Porto")))

    consolidate_user(owner_id=owner.pk)

    assert ChatWatermark.objects.get(chat=chat).summary_outcome == "too_large"
    assert suggestions(owner) == []
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic=EPISODES_TOPIC) == own
