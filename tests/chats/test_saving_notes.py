"""What happens when the model proposes a note: saved (with Undo), proposed, locked or refused, per the save
level, the 5-per-reply limit and the secret rule; and what revert_change may do."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory.models import Proposal
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import Scope, channel_key
from tests.chats.helpers import (
    bot_of,
    index_of,
    make_agent,
    new_chat,
    note,
    send,
    set_memory,
    system_of,
    tool_results,
    tools_of,
)
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def propose(model, *notes: dict, text: str = "Noted.") -> None:
    """The model proposes the notes in one round, then answers."""
    model.script(tool_calls(*[("propose_change", n) for n in notes]), reply(text))


def test_save_it_and_tell_me_saves_at_once_with_a_thirty_minute_undo(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    propose(model, VEGAN, text="Saved: you are vegan.")
    body = send(api, chat, "Remember that I am vegan.")
    assert index_of(owner) == "- diet: vegan, no honey\n"
    [saved] = body["memory"]["saved"]
    change = ChangeSet.objects.get(pk=saved["change_id"])
    assert change.automatic and change.chat_id == chat and change.source == "model"
    assert abs(change.undo_until - (change.created_at + timedelta(minutes=30))) < timedelta(seconds=5)
    [result] = tool_results(model.last_request)
    assert result["status"] == "saved" and result["change_id"] == change.pk
    assert body["reply"] == "Saved: you are vegan."
    assert Proposal.objects.count() == 0


def test_a_note_saved_at_once_over_another_says_what_it_replaced(api, client, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "work", "works as a teacher", details="A primary school in Ostia.")
    chat = new_chat(api)
    propose(model, {"kind": "memory", "topic": "work", "summary": "works as a nurse at Gemelli"})
    body = send(api, chat, "I changed jobs: I am a nurse at Gemelli now.")
    [saved] = body["memory"]["saved"]
    assert saved["summary"] == "works as a nurse at Gemelli"
    assert saved["before"] == {"summary": "works as a teacher", "details": "A primary school in Ostia.\n"}

    propose(model, {"kind": "memory", "topic": "pets", "summary": "has a cat called Miso"})
    body = send(api, chat, "I have a cat, Miso.")
    assert body["memory"]["saved"][0]["before"] is None  # a new note replaced nothing

    client.force_login(owner)
    page = client.get(f"/chats/{chat}/").content.decode()
    assert "Saved to memory</strong>: work — <span dir=\"auto\">works as a nurse at Gemelli</span>" in page
    assert ('<span class="muted">Before:</span> <span class="visually-hidden">Old text: </span>'
            '<del dir="auto">works as a teacher</del>') in page
    assert "A primary school in Ostia." in page
    assert page.count("Before:") == 1


def test_details_at_their_8_kib_cap_are_proposed_however_the_model_server_escapes_them(api, owner, model):
    details = "😀" * 2048  # 8192 bytes: the cap; the fake writes each as \ud83d\ude00 (12 characters)
    chat = new_chat(api)
    propose(model, {"kind": "memory", "topic": "smiles", "summary": "smiles a lot", "details": details})
    body = send(api, chat, "Remember how much I smile.")
    [proposed] = body["memory"]["proposed"]
    assert Proposal.objects.get(pk=proposed["proposal_id"]).details.rstrip("\n") == details


def test_ask_me_first_makes_a_proposal_and_writes_nothing(api, owner, model):
    chat = new_chat(api)
    propose(model, VEGAN)
    body = send(api, chat, "Remember that I am vegan.")
    assert index_of(owner) == ""
    [proposed] = body["memory"]["proposed"]
    proposal = Proposal.objects.get(pk=proposed["proposal_id"])
    assert proposal.status == "pending" and not proposal.locked and proposal.reason == "ask_first"
    assert proposal.expires_at - proposal.created_at == timedelta(hours=24)
    assert proposal.chat_id == chat
    assert tool_results(model.last_request)[0]["status"] == "proposed"


def test_always_confirm_makes_a_locked_proposal(api, owner, model):
    set_memory(owner, save_mode="always")
    propose(model, VEGAN)
    body = send(api, new_chat(api), "Remember that I am vegan.")
    [proposed] = body["memory"]["proposed"]
    assert proposed["locked"] is True and proposed["reason"] == "always_confirm"
    assert index_of(owner) == ""


def test_never_refuses_a_note_the_model_proposes_anyway(api, owner, model):
    set_memory(owner, save_mode="never")
    propose(model, VEGAN, text="Saving is off.")
    body = send(api, new_chat(api), "Remember that I am vegan.")
    assert index_of(owner) == "" and Proposal.objects.count() == 0
    [refused] = body["memory"]["refused"]
    assert refused["reason"] == "save_mode_never"
    assert tool_results(model.last_request)[0]["status"] == "refused"


def test_an_agent_always_rule_cannot_be_loosened_by_the_users_auto(api, owner, model):
    set_memory(owner, save_mode="auto")
    agent = make_agent(owner, memory="own", memory_save="always")
    propose(model, VEGAN)
    body = send(api, new_chat(api, agent=agent.pk))
    assert body["memory"]["proposed"][0]["locked"] is True
    assert body["memory"]["proposed"][0]["scope"] == "agent"


def test_the_sixth_note_of_a_reply_waits_for_confirmation(api, owner, model):
    set_memory(owner, save_mode="auto")
    notes = [{"kind": "memory", "topic": f"fact-{n}", "summary": f"fact number {n}"} for n in range(6)]
    propose(model, *notes)
    body = send(api, new_chat(api), "Remember these six facts.")
    assert [s["topic"] for s in body["memory"]["saved"]] == [f"fact-{n}" for n in range(5)]
    [waiting] = body["memory"]["proposed"]
    assert waiting["topic"] == "fact-5" and waiting["reason"] == "reply_limit"
    assert "fact-5" not in index_of(owner)


def test_a_note_with_an_api_key_waits_for_confirmation(api, owner, model):
    set_memory(owner, save_mode="auto")
    propose(model, {"kind": "memory", "topic": "openai", "summary": "key sk-proj-Abc123Def456Ghi789Jkl012"})
    body = send(api, new_chat(api), "Remember my OpenAI key.")
    assert body["memory"]["saved"] == []
    assert body["memory"]["proposed"][0]["reason"] == "looks_secret"
    assert index_of(owner) == ""


@pytest.mark.parametrize("topic", ["sk-abcdefghijklmnopqrstuvwx", "0123456789abcdef0123456789abcdef", "pin-4821"])
def test_a_note_whose_topic_holds_a_secret_waits_for_confirmation(api, owner, model, topic):
    """The topic starts the note's index line, which goes into every prompt: a key there is a secret too."""
    set_memory(owner, save_mode="auto")
    propose(model, {"kind": "memory", "topic": topic, "summary": "my code for the bank"})
    body = send(api, new_chat(api), "Remember it.")
    assert body["memory"]["saved"] == []
    assert body["memory"]["proposed"][0]["reason"] == "looks_secret"
    assert index_of(owner) == ""


def test_a_long_note_waits_for_confirmation(api, owner, model):
    set_memory(owner, save_mode="auto")
    propose(model, {**VEGAN, "details": "No animal products at all. " * 30})
    body = send(api, new_chat(api))
    assert body["memory"]["proposed"][0]["reason"] == "too_long"


def test_a_topic_in_another_script_is_refused_saying_a_topic_is_a_z_and_the_note_any_language(api, client,
                                                                                                owner, model):
    """The model of a person writing in Russian names the topic in Russian: "дом" is lower-case letters too,
    so the refusal says which letters a topic takes, and that the note itself may stay in Russian; the model
    proposes again with an ASCII topic and the Russian line is saved."""
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "дом", "summary": "Живу в Риме"})),
                 tool_calls(("propose_change", {"kind": "memory", "topic": "home", "summary": "Живу в Риме"})),
                 reply("Запомнил."))

    body = send(api, chat, "Запомни: я живу в Риме.")

    first, second = tool_results(model.last_request)
    assert first["status"] == "refused" and first["reason"] == "invalid_topic"
    assert "ASCII letters a-z" in first["message"] and "any language" in first["message"]
    assert second["status"] == "saved" and index_of(owner) == "- home: Живу в Риме\n"
    assert [r["reason"] for r in body["memory"]["refused"]] == ["invalid_topic"]
    client.force_login(owner)
    page = client.get(f"/chats/{chat}/").content.decode()
    assert "whatever the language of the note" in page


def test_the_topic_index_is_refused_saying_that_name_is_not_a_topic(api, owner, model):
    """"index" is a-z letters, but it is the name of the list of notes itself: the refusal says so, or the
    model could not tell what was wrong with it."""
    set_memory(owner, save_mode="auto")
    propose(model, {"kind": "memory", "topic": "index", "summary": "vegan"})

    send(api, new_chat(api), "I am vegan.")

    [result] = tool_results(model.last_request)
    assert result["reason"] == "invalid_topic" and "not index" in result["message"]
    assert index_of(owner) == ""


def test_a_scope_the_agent_may_not_save_to_is_refused(api, owner, model):
    set_memory(owner, save_mode="auto")
    agent = make_agent(owner, memory="own")
    propose(model, {**VEGAN, "scope": "user"})
    body = send(api, new_chat(api, agent=agent.pk))
    assert body["memory"]["refused"][0]["reason"] == "scope_not_allowed"
    assert index_of(owner) == "" and index_of(owner, Scope.agent(agent.pk)) == ""


def test_a_note_without_a_scope_goes_where_the_agent_choice_says(api, owner, model):
    set_memory(owner, save_mode="auto")
    agent = make_agent(owner, memory="mine_and_own")
    propose(model, VEGAN)
    send(api, new_chat(api, agent=agent.pk))
    assert index_of(owner, Scope.agent(agent.pk)) == "- diet: vegan, no honey\n"
    assert index_of(owner) == ""


@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_an_agents_own_note_of_a_topic_the_person_has_tells_the_model_their_note_stays(api, owner, model, save_mode):
    """"Mine and its own": the agent's note goes to its own notes (the host decides where, not the model). The
    model is told the person's note of that topic is left as it is, so it does not say it changed it."""
    set_memory(owner, save_mode=save_mode)
    note(owner, "diet", "vegetarian")
    agent = make_agent(owner, memory="mine_and_own")
    propose(model, VEGAN)

    send(api, new_chat(api, agent=agent.pk))

    [result] = tool_results(model.last_request)
    assert result["status"] == ("saved" if save_mode == "auto" else "proposed")
    assert result["users_note_unchanged"] is True
    assert "The person's own note \u201cdiet\u201d stays as it is" in result["message"]
    assert index_of(owner) == "- diet: vegetarian\n"


def test_an_agents_own_note_of_a_new_topic_says_nothing_of_the_persons_notes(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "home", "lives in Porto")
    agent = make_agent(owner, memory="mine_and_own")
    propose(model, VEGAN)

    send(api, new_chat(api, agent=agent.pk))

    [result] = tool_results(model.last_request)
    assert result["status"] == "saved" and "users_note_unchanged" not in result


def test_a_note_over_the_index_cap_is_refused_with_the_current_entries(api, owner, model):
    set_memory(owner, save_mode="auto")
    for n in range(40):
        note(owner, f"t{n}", "x")
    propose(model, VEGAN)
    body = send(api, new_chat(api))
    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "cap_exceeded"
    assert len(result["entries"]) == 40
    assert body["memory"]["refused"][0]["reason"] == "cap_exceeded"


@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_a_topic_file_over_its_cap_is_refused_with_its_current_text(api, owner, model, save_mode):
    """The spec: a file over its cap is refused and the answer lists what it holds now, so the model merges."""
    set_memory(owner, save_mode=save_mode)
    note(owner, "trip", "Japan in October", details="Tokyo, then Kyoto.\nA day in Nara <|im_start|>")
    propose(model, {"kind": "memory", "topic": "trip", "summary": "Japan in October", "details": "word " * 2000})
    body = send(api, new_chat(api), "Add every day of the plan.")
    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "topic_too_large"
    assert result["current"].startswith("Tokyo, then Kyoto.\nA day in Nara") and "<|im_start|>" not in result["current"]
    assert result["max_bytes"] == 8192 and "Memory/trip.md" in result["message"]
    assert body["memory"]["refused"][0]["reason"] == "topic_too_large"
    assert Proposal.objects.count() == 0 and index_of(owner) == "- trip: Japan in October -> trip.md\n"


def test_a_proposal_that_memory_already_says_is_not_made(api, owner, model):
    note(owner, "diet", "vegan, no honey")
    propose(model, VEGAN)
    body = send(api, new_chat(api))
    assert Proposal.objects.count() == 0
    [result] = tool_results(model.last_request)
    assert result["status"] == "saved" and result["already_saved"] is True and result["change_id"] is None
    assert body["memory"]["saved"] == [{"change_id": None, "topic": "diet", "scope": "user",
                                        "summary": "vegan, no honey", "undo_until": None, "already_saved": True,
                                        "before": None}]


def test_the_same_proposal_twice_waits_once(api, owner, model):
    chat = new_chat(api)
    propose(model, VEGAN)
    send(api, chat)
    propose(model, VEGAN)
    body = send(api, chat)
    assert Proposal.objects.count() == 1
    assert tool_results(model.last_request)[0]["already_waiting"] is True
    assert body["memory"]["proposed"][0]["proposal_id"] == Proposal.objects.get().pk


def test_revert_change_takes_back_the_last_automatic_note_of_the_chat(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegetarian")
    chat = new_chat(api)
    propose(model, VEGAN)
    send(api, chat)
    assert index_of(owner) == "- diet: vegan, no honey\n"
    model.script(tool_calls(("revert_change", {})), reply("Taken back."))
    body = send(api, chat, "Forget that.")
    assert index_of(owner) == "- diet: vegetarian\n"
    assert tool_results(model.last_request)[0]["status"] == "reverted"
    assert body["memory"]["reverted"][0]["undo_change_id"]


def test_revert_change_is_refused_under_always_confirm(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    propose(model, VEGAN)
    send(api, chat)
    set_memory(owner, save_mode="always")
    model.script(tool_calls(("revert_change", {})), reply("Use the Undo of the note."))
    body = send(api, chat, "Forget that.")
    # Not offered, nor named in the memory skill: every call would be refused.
    first = model.requests[-2]
    assert sorted(tools_of(first)) == ["context_read", "propose_change"]
    assert "revert_change" not in system_of(first) and "Skill memory:" in system_of(first)
    assert api.get(f"/api/chats/{chat}/tools").json()["tools"] == ["context_read", "propose_change"]
    # A call made anyway is refused, as the spec says.
    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "revert_locked"
    assert body["memory"]["refused"][0]["reason"] == "revert_locked"
    assert index_of(owner) == "- diet: vegan, no honey\n"


def test_revert_change_is_refused_after_thirty_minutes(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    propose(model, VEGAN)
    send(api, chat)
    with time_machine.travel(timezone.now() + timedelta(minutes=30, seconds=1), tick=False):
        model.script(tool_calls(("revert_change", {})), reply("Too late."))
        send(api, chat, "Forget that.")
    assert tool_results(model.last_request)[0]["reason"] == "undo_window_closed"
    assert index_of(owner) == "- diet: vegan, no honey\n"


def test_revert_change_cannot_touch_another_chats_change(api, owner, model):
    set_memory(owner, save_mode="auto")
    first, second = new_chat(api), new_chat(api)
    propose(model, VEGAN)
    body = send(api, first)
    change_id = body["memory"]["saved"][0]["change_id"]
    model.script(tool_calls(("revert_change", {"change_id": change_id})), reply("No."))
    send(api, second, "Forget that.")
    assert tool_results(model.last_request)[0]["reason"] == "nothing_to_revert"
    assert index_of(owner) == "- diet: vegan, no honey\n"


def test_save_it_and_tell_me_asks_before_a_shorter_file_for_an_older_note(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "trip", "Japan in October", details="Tokyo first.\nThen Kyoto.\nA day in Nara.")
    chat = new_chat(api)
    propose(model, {"kind": "memory", "topic": "trip", "summary": "Japan in October",
                    "details": "Tokyo first.\nThen Kyoto."})
    body = send(api, chat, "Drop Nara from the trip.")
    [proposed] = body["memory"]["proposed"]
    assert proposed["reason"] == "delete_needs_confirmation" and body["memory"]["saved"] == []
    assert "or part of one" in tool_results(model.last_request)[0]["message"]
    assert index_of(owner) == "- trip: Japan in October -> trip.md\n"

    propose(model, {"kind": "memory", "topic": "trip", "summary": "Japan in October",
                    "details": "Tokyo first.\nThen Kyoto, 3 days.\nA day in Nara.\nHome via Osaka."})
    body = send(api, chat, "Add Osaka at the end, and three days in Kyoto.")
    assert body["memory"]["saved"] and body["memory"]["proposed"] == []  # adding to a line or a line: no cut

    propose(model, {"kind": "memory", "topic": "trip", "summary": "Japan in late October", "details": ""})
    body = send(api, chat, "Make it late October.")
    assert body["memory"]["saved"] and body["memory"]["proposed"] == []  # the summary alone: no cut


def test_save_it_and_tell_me_asks_before_an_index_line_that_says_less(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "drinks", "likes tea and coffee, black")
    chat = new_chat(api)
    for shorter in ("likes tea", "nothing"):  # a line cut down, or emptied in words: a forget in disguise
        propose(model, {"kind": "memory", "topic": "drinks", "summary": shorter})
        body = send(api, chat, "Forget the coffee.")
        [proposed] = body["memory"]["proposed"]
        assert proposed["reason"] == "delete_needs_confirmation" and body["memory"]["saved"] == []
        assert index_of(owner) == "- drinks: likes tea and coffee, black\n"

    propose(model, {"kind": "memory", "topic": "drinks", "summary": "likes green tea and coffee with milk"})
    body = send(api, chat, "I take milk now, and green tea.")  # a changed fact, as long or longer: saved
    assert body["memory"]["saved"] and body["memory"]["proposed"] == []
    assert index_of(owner) == "- drinks: likes green tea and coffee with milk\n"


def confirm_in_the_inbox(owner, body) -> int:
    from localai_memory.memory.proposals import proposal_confirm

    proposal_id = body["memory"]["proposed"][0]["proposal_id"]
    return proposal_confirm(owner_id=owner.pk, proposal_id=proposal_id, actor="you").pk


def test_ask_me_first_a_note_you_just_confirmed_is_taken_back_by_revert_change(api, owner, model):
    note(owner, "diet", "vegetarian")
    chat = new_chat(api)
    propose(model, VEGAN)
    change_id = confirm_in_the_inbox(owner, send(api, chat, "Remember that I am vegan."))
    assert index_of(owner) == "- diet: vegan, no honey\n"

    model.script(tool_calls(("revert_change", {})), reply("Forgotten."))
    body = send(api, chat, "Actually, forget what I just told you.")

    [result] = tool_results(model.last_request)
    assert result["status"] == "reverted" and result["change_id"] == change_id
    assert index_of(owner) == "- diet: vegetarian\n"
    assert body["memory"]["reverted"][0]["change_id"] == change_id


def test_a_confirmed_note_is_not_taken_back_by_the_model_after_thirty_minutes(api, owner, model):
    chat = new_chat(api)
    propose(model, VEGAN)
    change_id = confirm_in_the_inbox(owner, send(api, chat, "Remember that I am vegan."))
    with time_machine.travel(timezone.now() + timedelta(minutes=30, seconds=1), tick=False):
        model.script(tool_calls(("revert_change", {"change_id": change_id})), reply("Too late."))
        send(api, chat, "Forget that.")
    assert tool_results(model.last_request)[0]["reason"] == "nothing_to_revert"
    assert index_of(owner) == "- diet: vegan, no honey\n"


def test_in_a_group_only_a_paired_sender_gets_a_confirmed_note_taken_back(owner, model):
    from localai_memory.chats.services import Sender, chat_create, turn_run

    chat = chat_create(owner_id=owner.pk, origin="messaging", binding_id=bot_of(owner),
                       conversation_key=channel_key(bot_of(owner), "group-1"), one_to_one=None)
    propose(model, VEGAN)
    asked = turn_run(chat=chat, content="Remember I am vegan", sender=Sender(9, "Bob", paired=True,
                                                                             can_confirm=True))
    confirm_in_the_inbox(owner, {"memory": asked.memory})
    key = Scope("channel", channel_key(bot_of(owner), "group-1"))
    assert index_of(owner, key) == "- diet: vegan, no honey\n"

    model.script(tool_calls(("revert_change", {})), reply("No."))
    stranger = turn_run(chat=chat, content="Forget that", sender=Sender(10, "Eve", paired=False,
                                                                       can_confirm=False))
    assert stranger.memory["refused"][0]["reason"] == "nothing_to_revert"
    assert index_of(owner, key) == "- diet: vegan, no honey\n"

    model.script(tool_calls(("revert_change", {})), reply("No."))
    carol = turn_run(chat=chat, content="Forget that", sender=Sender(11, "Carol", paired=True, can_confirm=False))
    assert carol.memory["refused"][0]["reason"] == "nothing_to_revert"  # paired, but may not confirm notes

    model.script(tool_calls(("revert_change", {})), reply("Done."))
    paired = turn_run(chat=chat, content="Forget that", sender=Sender(9, "Bob", paired=True, can_confirm=True))
    assert paired.memory["reverted"]
    assert index_of(owner, key) == ""


def test_a_propose_call_while_memory_is_off_writes_nothing(api, owner, model):
    set_memory(owner, save_mode="auto", enabled=False)
    propose(model, VEGAN)
    body = send(api, new_chat(api))
    assert index_of(owner) == "" and Proposal.objects.count() == 0
    assert tool_results(model.last_request)[0]["status"] == "refused"
    assert body["memory"]["refused"][0]["reason"] == "user_off"
    assert body["memory"]["refused"][0]["message"].startswith("Memory is off in your settings.")  # said once


def test_malformed_tool_arguments_are_answered_with_an_error(api, owner, model):
    model.script(tool_calls(("propose_change", "{not json"), ("context_read", "{not json")), reply("Sorry."))
    body = send(api, new_chat(api))
    proposed, read = tool_results(model.last_request)
    assert proposed["status"] == "refused" and proposed["reason"] == "invalid_arguments"
    assert read["status"] == "error" and read["error"] == "invalid_arguments"
    assert body["reply"] == "Sorry."


def test_context_read_returns_the_topic_and_lists_topics_when_unknown(api, owner, model):
    note(owner, "home", "lives in Rome", details="Trastevere since 2024.")
    model.script(tool_calls(("context_read", {"topic": "home"}), ("context_read", {"topic": "work"})),
                 reply("You live in Rome."))
    body = send(api, new_chat(api))
    found, missing = tool_results(model.last_request)
    assert found["details"] == "Trastevere since 2024.\n" and found["summary"] == "lives in Rome"
    assert missing["error"] == "unknown_topic" and missing["topics"][0]["topic"] == "home"
    assert body["memory"]["topics_read"] == [{"scope": "user", "topic": "home", "path": "Memory/home.md"}]


def test_a_note_that_is_one_line_is_named_as_its_index_line_where_the_chat_says_what_it_used(api, client, owner,
                                                                                             model):
    note(owner, "home", "lives in Rome")
    note(owner, "diet", "vegetarian", details="No meat, fish is fine.")
    model.script(tool_calls(("context_read", {"topic": "home"}), ("context_read", {"topic": "diet"})),
                 reply("You live in Rome."))
    chat = new_chat(api)
    body = send(api, chat, "Where do I live?")
    found, _ = tool_results(model.last_request)
    assert found["path"] == "Memory/index.md" and found["details"] is None
    assert body["memory"]["topics_read"] == [{"scope": "user", "topic": "home", "path": "Memory/index.md"},
                                             {"scope": "user", "topic": "diet", "path": "Memory/diet.md"}]

    client.force_login(owner)
    page = client.get(f"/chats/{chat}/").content.decode()
    assert ("<li>“home” from your notes: its line in the index — <a href=\"/files/open/?path=Memory/index.md\">"
            "<code>Memory/index.md</code></a></li>") in page
    assert "<li>“diet” from your notes — <a href=\"/files/open/?path=Memory/diet.md\">" in page
    assert "Memory/home.md" not in page
    assert "used 3 memories" in page  # the index, and each note read, though two are in one file


def test_an_old_chats_report_naming_a_one_line_notes_topic_file_is_shown_as_its_index_line(client, owner):
    """A turn stored before context_read named the index for a one-line note names Memory/home.md, a file
    that does not exist: the chip shows the line in the index, as a turn now does. A note with a file keeps
    its file, and a note gone since stays as the turn named it."""
    from localai_memory.chats.models import Chat, Message, Role

    note(owner, "home", "lives in Rome")
    note(owner, "diet", "vegetarian", details="No meat, fish is fine.")
    chat = Chat.objects.create(owner=owner)
    Message.objects.create(chat=chat, role=Role.USER, content="Where do I live?")
    Message.objects.create(chat=chat, role=Role.ASSISTANT, content="You live in Rome.", memory={
        "read": [{"scope": "user", "path": "Memory/index.md"}],
        "topics_read": [{"scope": "user", "topic": "home", "path": "Memory/home.md"},
                        {"scope": "user", "topic": "diet", "path": "Memory/diet.md"},
                        {"scope": "user", "topic": "pets", "path": "Memory/pets.md"}]})

    client.force_login(owner)
    page = client.get(f"/chats/{chat.pk}/").content.decode()

    assert ("<li>“home” from your notes: its line in the index — <a href=\"/files/open/?path=Memory/index.md\">"
            "<code>Memory/index.md</code></a></li>") in page
    assert "Memory/home.md" not in page
    assert "<li>“diet” from your notes — <a href=\"/files/open/?path=Memory/diet.md\">" in page
    assert "<li>“pets” from your notes — <a href=\"/files/open/?path=Memory/pets.md\">" in page


def test_context_read_cannot_open_notes_the_agent_may_not_read(api, owner, model):
    agent = make_agent(owner, memory="own")
    note(owner, "home", "lives in Rome")
    model.script(tool_calls(("context_read", {"topic": "home", "scope": "user"}),
                            ("context_read", {"topic": "home"})), reply("I cannot see that."))
    send(api, new_chat(api, agent=agent.pk))
    scoped, unscoped = tool_results(model.last_request)
    assert scoped["status"] == "refused"
    assert unscoped["error"] == "unknown_topic"
    assert "Rome" not in str(model.last_request["messages"])


def test_the_tool_loop_is_bounded_and_ends_with_an_answer(api, owner, model):
    note(owner, "home", "lives in Rome")
    model.script(*[tool_calls(("context_read", {"topic": "home"}))] * 6, reply("Finally."))
    body = send(api, new_chat(api))
    assert body["reply"] == "Finally."
    assert len(model.requests) == 7
    assert "tools" not in model.requests[-1]
    assert all(tools_of(r) for r in model.requests[:6])


def test_a_paired_sender_in_a_one_to_one_chat_saves_to_the_conversation(owner, model):
    from localai_memory.chats.services import Sender, chat_create, turn_run

    set_memory(owner, messaging_save="paired_private")
    key = channel_key(bot_of(owner), "dm-1")
    chat = chat_create(owner_id=owner.pk, origin="messaging", binding_id=bot_of(owner), conversation_key=key, one_to_one=True)
    propose(model, VEGAN)
    result = turn_run(chat=chat, content="Remember I am vegan", sender=Sender(9, "Bob", paired=True,
                                                                              can_confirm=True))
    assert result.memory["saved"][0]["scope"] == "channel"
    assert index_of(owner, Scope("channel", key)) == "- diet: vegan, no honey\n"
    assert index_of(owner) == ""


def test_a_group_chat_asks_even_for_a_paired_sender(owner, model):
    from localai_memory.chats.services import Sender, chat_create, turn_run

    set_memory(owner, messaging_save="paired_private")
    chat = chat_create(owner_id=owner.pk, origin="messaging", binding_id=bot_of(owner),
                       conversation_key=channel_key(bot_of(owner), "group-1"), one_to_one=None)
    propose(model, VEGAN)
    result = turn_run(chat=chat, content="Remember I am vegan", sender=Sender(9, "Bob", paired=True,
                                                                              can_confirm=True))
    assert result.memory["saved"] == []
    proposal = Proposal.objects.get(pk=result.memory["proposed"][0]["proposal_id"])
    assert proposal.requested_by_sender_id == 9 and proposal.origin == "messaging"


def test_a_note_only_its_requester_could_confirm_is_taken_back_only_at_their_request(owner, model):
    from localai_memory.chats.services import Sender, chat_create, turn_run

    chat = chat_create(owner_id=owner.pk, origin="messaging", binding_id=bot_of(owner),
                       conversation_key=channel_key(bot_of(owner), "group-2"), one_to_one=None)
    propose(model, {**VEGAN, "scope": "user"})
    asked = turn_run(chat=chat, content="Remember I am vegan", sender=Sender(9, "Bob", paired=True, can_confirm=True))
    proposal = Proposal.objects.get(pk=asked.memory["proposed"][0]["proposal_id"])
    assert proposal.requester_only and proposal.scope_kind == "user"
    confirm_in_the_inbox(owner, {"memory": asked.memory})
    assert index_of(owner) == "- diet: vegan, no honey\n"

    model.script(tool_calls(("revert_change", {})), reply("No."))
    dave = turn_run(chat=chat, content="Forget that", sender=Sender(12, "Dave", paired=True, can_confirm=True))
    assert dave.memory["refused"][0]["reason"] == "nothing_to_revert"
    model.script(tool_calls(("revert_change", {})), reply("Done."))
    bob = turn_run(chat=chat, content="Forget that", sender=Sender(9, "Bob", paired=True, can_confirm=True))
    assert bob.memory["reverted"] and index_of(owner) == ""


def test_a_turn_whose_agent_is_deleted_while_it_runs_writes_nothing_into_the_agents_folder(owner, model):
    """The turn read its chat (with the agent) before the delete; its note comes after it."""
    import json

    from localai_memory.agents.services import agent_delete
    from localai_memory.chats import remember
    from localai_memory.chats import services as chat_services
    from localai_memory.chats.selectors import chat_scopes, turn_facts
    from localai_memory.chats.tools import ToolContext, new_report, run_tool
    from localai_memory.memory import policy
    from localai_memory.notes.models import NoteFile

    set_memory(owner, save_mode="auto")
    agent = make_agent(owner, memory="own")
    chat = chat_services.chat_create(owner_id=owner.pk, agent_id=agent.pk, origin="web", title="x")
    facts = turn_facts(chat=chat)
    decision = policy.decide_turn(facts)
    ctx = ToolContext(chat=chat, facts=facts, decision=decision, scopes=chat_scopes(chat=chat),
                      tools=sorted(decision.tools), sender=None, report=new_report(decision))
    assert decision.default_scope == "agent"

    agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="delete")
    result = run_tool(ctx, "propose_change", json.dumps(VEGAN))
    typed = remember.remember_run(ctx=ctx, fact="Chef cooks without garlic")

    assert result["status"] == "refused" and result["reason"] == "agent_deleted"
    assert typed.startswith("Nothing was saved. This agent was deleted")
    assert not NoteFile.objects.filter(owner=owner, path__startswith=f"Memory/agents/{agent.pk}/").exists()
    assert not Proposal.objects.exists()


def test_a_conversation_whose_bot_was_deleted_meanwhile_saves_nothing(owner, model):
    from localai_memory.chats.services import Sender, chat_create, turn_run

    set_memory(owner, messaging_save="paired_private")
    chat = chat_create(owner_id=owner.pk, origin="messaging", binding_id=999_999,
                       conversation_key=channel_key(999_999, "dm-1"), one_to_one=True)
    propose(model, VEGAN)
    result = turn_run(chat=chat, content="Remember I am vegan", sender=Sender(9, "Bob", paired=True,
                                                                              can_confirm=True))
    assert [r["reason"] for r in result.memory["refused"]] == ["bot_deleted"]
    assert index_of(owner, Scope("channel", channel_key(999_999, "dm-1"))) == ""


def test_every_answer_of_propose_and_revert_is_saved_proposed_reverted_or_refused(api, owner, model):
    """The tools' contract: propose_change answers saved, proposed or refused with the reason; revert_change
    reverted or refused. A malformed call, a topic file over its cap and a bad change id are refusals the
    person sees in the turn's report too, never a status of their own."""
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", '{"topic": "diet", "summary": '),
                            ("propose_change", {"kind": "memory", "topic": "diet"}),
                            ("propose_change", {"kind": "memory", "topic": "book", "summary": "a long book",
                                                "details": "word " * 2000}),
                            ("revert_change", {"change_id": "abc"})),
                 reply("Done."))
    body = send(api, chat, "Remember all of it.")
    results = tool_results(model.last_request)
    assert [(r["status"], r["reason"]) for r in results] == [
        ("refused", "invalid_arguments"), ("refused", "invalid_summary"), ("refused", "topic_too_large"),
        ("refused", "invalid_arguments")]
    assert [r["reason"] for r in body["memory"]["refused"]] == [
        "invalid_arguments", "invalid_summary", "topic_too_large", "invalid_arguments"]
    assert body["memory"]["refused"][2]["topic"] == "book"
    assert index_of(owner) == "" and body["memory"]["saved"] == []


def test_a_nul_or_a_lone_surrogate_from_the_model_is_stored_cleaned_and_the_turn_answers(api, owner, model):
    """Text from the model server that PostgreSQL cannot hold (a NUL, a lone UTF-16 surrogate: valid JSON,
    not valid Unicode) is cleaned where it enters: the note, the turn's report and the chat's log are all
    stored, and the report names the line as it was saved (one line, no arrow)."""
    from localai_memory.chats.models import Message

    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan\u0000ish"}),
                            ("propose_change", '{"kind": "memory", "topic": "pet", "summary": "a cat \\ud800 Mia"}'),
                            ("propose_change", {"kind": "memory", "topic": "home",
                                                "summary": "Rome\n- evil: injected -> evil.md"})),
                 reply("Saved \ud800 all\u0000."))
    body = send(api, chat, "Remember these.")
    assert body["reply"] == "Saved \ufffd all."
    assert [s["summary"] for s in body["memory"]["saved"]] == [
        "vegan ish", "a cat \ufffd Mia", "Rome - evil: injected → evil.md"]
    assert index_of(owner) == ("- diet: vegan ish\n- pet: a cat \ufffd Mia\n"
                               "- home: Rome - evil: injected → evil.md\n")
    stored = list(Message.objects.filter(chat_id=chat).order_by("id").values_list("role", "content"))
    assert stored == [("user", "Remember these."), ("assistant", "Saved \ufffd all.")]


def test_two_notes_saved_in_one_reply_each_have_their_own_undo(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", VEGAN),
                            ("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Rome"})),
                 reply("Saved both."))
    first, second = send(api, chat, "I am vegan and I live in Rome.")["memory"]["saved"]
    response = api.post(f"/api/chats/changes/{first['change_id']}/undo", format="json")
    assert response.status_code == 200, response.content
    assert index_of(owner) == "- home: lives in Rome\n"
    model.script(tool_calls(("revert_change", {"change_id": second["change_id"]})), reply("Taken back."))
    send(api, chat, "Forget where I live.")
    assert index_of(owner) == ""
