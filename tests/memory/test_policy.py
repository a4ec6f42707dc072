"""The memory policy against the spec: a table written by hand from spec/short-memory.md and DESIGN §6, and a
walk of the whole input space against a plain oracle written here, independent of the module's helpers.

No database: the policy is pure.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from localai_memory.memory.policy import (
    LONG_NOTE_CHARS,
    MAX_AUTO_SAVES_PER_REPLY,
    MESSAGES,
    PROPOSAL_TTL,
    UNDO_WINDOW,
    NoteFacts,
    TurnFacts,
    answer_refusal,
    decide_note,
    decide_revert,
    decide_turn,
    looks_secret,
    may_answer,
    proposal_expired,
    strictest,
    undo_open,
)

ALL_TOOLS = {"context_read", "memory_search", "propose_change", "revert_change"}
READ_TOOLS = {"context_read", "memory_search"}


def facts(**overrides: Any) -> TurnFacts:
    """A web chat without an agent, memory on, default settings; ``overrides`` change any field."""
    values: dict[str, Any] = {
        "private_chat": False,
        "has_agent": False,
        "agent_tools_memory": True,
        "agent_addons_memory": False,
        "agent_memory": None,
        "agent_memory_save": None,
        "agent_grant_write": True,
        "user_enabled": True,
        "save_mode": "ask",
        "messaging_save": "ask",
        "server_files_on": True,
        "provider": "builtin",
        "origin": "web",
    }
    values.update(overrides)
    return TurnFacts(**values)


def agent(memory: str | None = "mine_and_own", **overrides: Any) -> TurnFacts:
    return facts(has_agent=True, agent_memory=memory, **overrides)


def messaging(**overrides: Any) -> TurnFacts:
    return facts(origin="messaging", **overrides)


def dm_from_paired(**overrides: Any) -> TurnFacts:
    """A message from a paired sender in a known one-to-one chat, the row set to paired_private."""
    values = {"messaging_save": "paired_private", "sender_paired": True, "one_to_one": True}
    values.update(overrides)
    return messaging(**values)


def note(scope: str | None = None, **overrides: Any) -> NoteFacts:
    values: dict[str, Any] = {
        "scope": scope,
        "length": 40,
        "looks_secret": False,
        "saved_in_this_reply": 0,
        "is_delete": False,
    }
    values.update(overrides)
    return NoteFacts(**values)


# --------------------------------------------------------------------------------------------------------
# The table, by hand. Each row cites the sentence of the spec (or DESIGN §6) it encodes.
# --------------------------------------------------------------------------------------------------------


def on(reads: set[str], scopes: tuple[str, ...] = (), level: str = "never") -> dict[str, Any]:
    """Memory on: these notes read, these scopes offered to propose_change (none: no propose tool). Under
    Always confirm "revert_change is refused": it is not offered."""
    tools = (ALL_TOOLS - {"revert_change"} if level == "always" else ALL_TOOLS) if scopes else READ_TOOLS
    return {
        "memory_on": True,
        "code": None,
        "blocked_by": None,
        "read_scopes": reads,
        "tools": tools,
        "propose_scopes": scopes,
        "default_scope": scopes[0] if scopes else None,
        "effective_level": level,
    }


def off(code: str, blocked_by: str) -> dict[str, Any]:
    """Memory off at ``blocked_by``: nothing read, no tool, nothing saved."""
    return {
        "memory_on": False,
        "code": code,
        "blocked_by": blocked_by,
        "read_scopes": set(),
        "tools": set(),
        "propose_scopes": (),
        "default_scope": None,
        "effective_level": "never",
    }


UA = {"user", "agent"}
UC = {"user", "channel"}
UAC = {"user", "agent", "channel"}

TURN_TABLE = [
    # "It is on until you turn it off." "Ask me first (default)". "A chat without an agent reads your notes
    # and saves to them, as before."
    pytest.param(facts(), on({"user"}, ("user",), "ask"), id="a_plain_web_chat"),
    # "Turn it off to make the chat private: it neither reads nor saves memory."
    pytest.param(facts(private_chat=True), off("private_chat", "chat"), id="a_private_chat"),
    # "2. The agent of the chat turns memory off in its Tools list."
    pytest.param(agent(agent_tools_memory=False), off("agent_tools_off", "agent"), id="agent_tools_list_off"),
    # "3. Your switch in the account settings is off."
    pytest.param(facts(user_enabled=False), off("user_off", "user"), id="the_users_switch_off"),
    # "Off is the same as the switch above: the two are one choice."
    pytest.param(facts(provider="off"), off("user_off", "user"), id="the_provider_off"),
    # "4. The server has files off, because notes are files."
    pytest.param(facts(server_files_on=False), off("server_files_off", "server"), id="server_files_off"),
    # "If the add-on you picked stops ... memory is off ... reports the code memory_provider_unavailable."
    pytest.param(
        facts(provider="addon_unavailable"), off("memory_provider_unavailable", "provider"), id="add_on_gone"
    ),
    # "A saved agent has its own choice of notes… The host enforces it": an add-on that keeps notes apart per
    # namespace is handed the choice; one of one store for every chat serves no agent beyond the user's notes.
    pytest.param(agent("own", provider="addon", addon_namespaces=True), on({"agent"}, ("agent",), "ask"),
                 id="own_with_an_add_on_of_namespaces"),
    pytest.param(agent("own", provider="addon"), off("memory_provider_one_store", "provider"),
                 id="own_with_an_add_on_of_one_store"),
    pytest.param(agent("mine_and_own", provider="addon"), off("memory_provider_one_store", "provider"),
                 id="mine_and_own_with_an_add_on_of_one_store"),
    pytest.param(agent("mine", provider="addon"), on({"user"}, ("user",), "ask"), id="mine_with_an_add_on_of_one_store"),
    # "The narrowest level wins, and a wider level never overrides a narrower one."
    pytest.param(
        facts(private_chat=True, user_enabled=False, server_files_on=False),
        off("private_chat", "chat"),
        id="the_narrowest_level_is_named",
    ),
    # "with your switch off, an agent that is allowed to save notes still reads and saves none."
    pytest.param(
        agent(user_enabled=False, save_mode="auto"), off("user_off", "user"), id="agent_under_switch_off"
    ),
    # "Mine and its own (new agents) | Your notes and the agent's own | The agent's own notes"
    pytest.param(agent("mine_and_own"), on(UA, ("agent",), "ask"), id="mine_and_own"),
    # "Its own only | The agent's own notes | The agent's own notes"
    pytest.param(agent("own"), on({"agent"}, ("agent",), "ask"), id="own"),
    # "Mine | Your notes | Your notes (every chat of yours sees it)"
    pytest.param(agent("mine"), on({"user"}, ("user",), "ask"), id="mine"),
    # "None | Nothing | Nowhere"
    pytest.param(agent("none"), off("agent_memory_none", "agent"), id="none"),
    # "As before | Your notes and the agent's own, when its Add-ons list names memory | The model chooses
    # user, agent or channel, as it did"
    pytest.param(agent(None, agent_addons_memory=True), on(UA, ("user", "agent"), "ask"), id="as_before"),
    # "An agent that never had the field keeps reading and saving exactly as it did" (no add-on: nothing).
    pytest.param(agent(None), off("agent_addons_no_memory", "agent"), id="as_before_without_the_add_on"),
    # "Sub-agents get no notes and cannot save."
    pytest.param(agent(origin="subagent"), off("subagent", "run"), id="a_sub_agent"),
    # "Triggers and other runs that start by themselves read per the choice and cannot save."
    pytest.param(agent("own", origin="trigger", save_mode="auto"), on({"agent"}), id="a_trigger"),
    pytest.param(facts(origin="job", save_mode="auto"), on({"user"}), id="a_job_without_agent"),
    # "Never | The assistant cannot propose a note."
    pytest.param(facts(save_mode="never"), on({"user"}), id="save_mode_never"),
    # "Save it and tell me | In your own chats the note is saved at once."
    pytest.param(facts(save_mode="auto"), on({"user"}, ("user",), "auto"), id="save_mode_auto"),
    # "If the server cannot read your choice, it asks first."
    pytest.param(facts(save_mode=None), on({"user"}, ("user",), "ask"), id="save_mode_unreadable"),
    # "The agent's rule ... Always confirm or Never only. It can ask more than you, never less"
    pytest.param(
        agent(save_mode="auto", agent_memory_save="always"), on(UA, ("agent",), "always"), id="rule_always"
    ),
    pytest.param(agent(save_mode="auto", agent_memory_save="never"), on(UA), id="rule_never"),
    pytest.param(agent(save_mode="never", agent_memory_save="always"), on(UA), id="rule_always_under_never"),
    # "The grant Remember things (memory.write) still decides whether the agent may save"
    pytest.param(agent(save_mode="auto", agent_grant_write=False), on(UA), id="no_write_grant"),
    # "This does not change what a chat from a messaging app reads: it still reads your notes and those of
    # its own conversation."
    pytest.param(messaging(), on(UC, ("channel",), "ask"), id="a_messaging_chat"),
    pytest.param(
        messaging(has_agent=True, agent_memory="own"), on(UAC, ("channel",), "ask"), id="messaging_own"
    ),
    # "Chats that come from a messaging app ask first, unless you chose Save it for a paired sender"
    pytest.param(messaging(save_mode="auto"), on(UC, ("channel",), "ask"), id="messaging_under_auto"),
    # "Never | No note is saved from messaging apps. The model gets no way to propose one."
    pytest.param(messaging(save_mode="auto", messaging_save="never"), on(UC), id="messaging_row_never"),
    # "The note is saved at once only when the sender is paired and the chat is one-to-one"
    pytest.param(dm_from_paired(), on(UC, ("channel", "user"), "auto"), id="paired_private_dm"),
    # "When it does not know, the chat counts as a group, so nothing is saved at once."
    pytest.param(dm_from_paired(one_to_one=None), on(UC, ("channel", "user"), "ask"), id="unknown_chat"),
    pytest.param(dm_from_paired(one_to_one=False), on(UC, ("channel", "user"), "ask"), id="group_chat"),
    # "It reaches the agent's own notes or yours only from a paired sender"
    pytest.param(dm_from_paired(sender_paired=False), on(UC, ("channel",), "ask"), id="unpaired_sender"),
    # "If your level is Always confirm or Never, the messaging row cannot loosen it"
    pytest.param(
        dm_from_paired(save_mode="always"), on(UC, ("channel", "user"), "always"), id="dm_under_always"
    ),
    pytest.param(dm_from_paired(save_mode="never"), on(UC), id="dm_under_never"),
    # "When any of these cannot be read, the host asks."
    pytest.param(
        dm_from_paired(save_mode=None), on(UC, ("channel", "user"), "ask"), id="dm_level_unreadable"
    ),
    pytest.param(
        messaging(save_mode="auto", messaging_save=None),
        on(UC, ("channel",), "ask"),
        id="messaging_row_unreadable",
    ),
    # "only when the agent's memory choice allows that scope" (as before: "user, agent or channel")
    pytest.param(
        dm_from_paired(has_agent=True, agent_memory=None, agent_addons_memory=True),
        on(UAC, ("channel", "user", "agent"), "auto"),
        id="as_before_in_messaging",
    ),
]


@pytest.mark.parametrize(("turn_facts", "expected"), TURN_TABLE)
def test_each_turn_reads_and_offers_what_the_spec_says(
    turn_facts: TurnFacts, expected: dict[str, Any]
) -> None:
    decision = decide_turn(turn_facts)
    assert {key: getattr(decision, key) for key in expected} == expected


def saved(scope: str, reason: str) -> tuple[str, str | None, str, bool]:
    return ("save_now", scope, reason, False)


def asked(scope: str, reason: str, *, requester_only: bool = False) -> tuple[str, str | None, str, bool]:
    return ("ask", scope, reason, requester_only)


def locked(scope: str) -> tuple[str, str | None, str, bool]:
    return ("locked", scope, "always_confirm", True)


def refused(reason: str) -> tuple[str, str | None, str, bool]:
    return ("refuse", None, reason, False)


AUTO = facts(save_mode="auto")
MINE_AND_OWN_DM = dm_from_paired(has_agent=True, agent_memory="mine_and_own")

NOTE_TABLE = [
    # "Save it and tell me | In your own chats the note is saved at once."
    pytest.param(AUTO, note(), saved("user", "save_and_tell"), id="auto_saves_now"),
    # "Ask me first (default) | The assistant proposes the note and you confirm it."
    pytest.param(facts(), note(), asked("user", "ask_first"), id="ask_asks"),
    # "If the server cannot read your choice, it asks first."
    pytest.param(facts(save_mode=None), note(), asked("user", "settings_unreadable"), id="unreadable_asks"),
    # "Always confirm | Like Ask me first, and nothing can loosen it."
    pytest.param(facts(save_mode="always"), note(), locked("user"), id="always_locks"),
    # "Never | The assistant cannot propose a note."
    pytest.param(facts(save_mode="never"), note(), refused("save_mode_never"), id="never_refuses"),
    # "A long note, or one that looks like it holds a secret ... waits for your confirmation instead."
    pytest.param(AUTO, note(looks_secret=True), asked("user", "looks_secret"), id="a_secret_waits"),
    pytest.param(
        AUTO, note(length=LONG_NOTE_CHARS + 1), asked("user", "too_long"), id="a_501_char_note_waits"
    ),
    pytest.param(
        AUTO, note(length=LONG_NOTE_CHARS), saved("user", "save_and_tell"), id="a_500_char_note_saves"
    ),
    # Reading: a turn that read a client's tool results (a page, a search) may have been told what to
    # remember by them, so its notes wait for the owner's yes.
    pytest.param(AUTO, note(outside_text=True), asked("user", "outside_text"), id="after_outside_text_asks"),
    # "An automatic note is one change set like any other… Every automatic note is in the audit of changes":
    # the host keeps no copy of an add-on's notes, so it cannot give one either, and the note waits.
    pytest.param(facts(save_mode="auto", provider="addon"), note(), asked("user", "addon_no_undo"),
                 id="an_add_ons_note_waits_under_save_and_tell"),
    pytest.param(agent("own", save_mode="auto", provider="addon", addon_namespaces=True), note(),
                 asked("agent", "addon_no_undo"), id="an_add_ons_note_for_the_agent_waits_too"),
    # "A reply saves at most 5 notes at once."
    pytest.param(AUTO, note(saved_in_this_reply=4), saved("user", "save_and_tell"), id="the_5th_saves"),
    pytest.param(AUTO, note(saved_in_this_reply=5), asked("user", "reply_limit"), id="the_6th_waits"),
    # "For an older note it proposes a shorter file, and you confirm that too."
    pytest.param(AUTO, note(is_delete=True), asked("user", "delete_needs_confirmation"), id="a_delete_waits"),
    # The host's own suggestion to forget an old note of the model's in a full index says why it came.
    pytest.param(AUTO, note(is_delete=True, makes_room=True), asked("user", "make_room"), id="make_room_waits"),
    pytest.param(facts(save_mode="ask"), note(is_delete=True, makes_room=True), asked("user", "make_room"),
                 id="make_room_asks"),
    # Under Always confirm it is locked like every note, and still says why it came.
    pytest.param(facts(save_mode="always"), note(is_delete=True, makes_room=True),
                 ("locked", "user", "make_room", True), id="make_room_under_always_confirm_is_locked"),
    pytest.param(agent("mine", agent_memory_save="always"), note(is_delete=True, makes_room=True),
                 ("locked", "user", "make_room", True), id="make_room_under_the_agents_always_confirm"),
    pytest.param(facts(save_mode="never"), note(is_delete=True, makes_room=True), refused("save_mode_never"),
                 id="make_room_under_never_is_refused"),
    # "The memory kind of propose_change accepts only the scope of the choice ... any other scope is refused."
    pytest.param(
        agent("own", save_mode="auto"), note("user"), refused("scope_not_allowed"), id="own_refuses_user"
    ),
    pytest.param(
        agent("own", save_mode="auto"), note(), saved("agent", "save_and_tell"), id="own_fills_in_agent"
    ),
    pytest.param(AUTO, note("channel"), refused("scope_not_allowed"), id="web_refuses_channel"),
    # "As before ... The model chooses user, agent or channel, as it did"
    pytest.param(
        agent(None, agent_addons_memory=True, save_mode="auto"),
        note("agent"),
        saved("agent", "save_and_tell"),
        id="as_before_chooses_agent",
    ),
    # "If you choose to be asked, it asks, even when you let it write to memory."
    pytest.param(agent("mine"), note(), asked("user", "ask_first"), id="agent_asks_under_ask"),
    pytest.param(
        agent("mine", save_mode="auto", agent_grant_write=False),
        note(),
        refused("no_write_grant"),
        id="no_grant",
    ),
    # "Scheduled and background runs cannot save notes at all."
    pytest.param(facts(origin="trigger", save_mode="auto"), note(), refused("scheduled_run"), id="trigger"),
    pytest.param(facts(origin="subagent", save_mode="auto"), note(), refused("subagent"), id="sub_agent"),
    pytest.param(
        facts(private_chat=True, save_mode="auto"), note(), refused("private_chat"), id="private_chat"
    ),
    # "It goes to the notes of that conversation, with an Undo."
    pytest.param(dm_from_paired(), note(), saved("channel", "paired_private"), id="paired_private_saves"),
    # "A secret-looking note still waits, and the limit of 5 notes a reply and the size limit stay."
    pytest.param(dm_from_paired(), note(looks_secret=True), asked("channel", "looks_secret"), id="dm_secret"),
    pytest.param(dm_from_paired(), note(saved_in_this_reply=5), asked("channel", "reply_limit"), id="dm_6th"),
    pytest.param(dm_from_paired(), note(length=501), asked("channel", "too_long"), id="dm_long"),
    # "The person who wrote the message is not always you, so a message from outside never saves to your
    # memory without your confirmation."
    pytest.param(
        dm_from_paired(one_to_one=False),
        note(),
        asked("channel", "messaging_asks"),
        id="paired_private_group",
    ),
    pytest.param(
        messaging(save_mode="auto"), note(), asked("channel", "messaging_asks"), id="messaging_auto"
    ),
    # "It reaches the agent's own notes or yours only from a paired sender, only when the agent's memory
    # choice allows that scope, and only after that sender confirms it"
    pytest.param(
        dm_from_paired(),
        note("user"),
        asked("user", "confirm_other_scope", requester_only=True),
        id="dm_to_user",
    ),
    pytest.param(
        MINE_AND_OWN_DM,
        note("agent"),
        asked("agent", "confirm_other_scope", requester_only=True),
        id="dm_to_agent",
    ),
    pytest.param(
        dm_from_paired(sender_paired=False), note("user"), refused("sender_not_paired"), id="unpaired_to_user"
    ),
    pytest.param(MINE_AND_OWN_DM, note("user"), refused("scope_not_allowed"), id="dm_to_a_scope_not_chosen"),
    # "Under Always confirm only the paired sender who asked can confirm a note, in a private chat too."
    pytest.param(dm_from_paired(save_mode="always"), note(), locked("channel"), id="dm_under_always"),
    pytest.param(
        messaging(messaging_save="never"), note(), refused("messaging_never"), id="messaging_row_never"
    ),
    # "An agent whose memory is None saves nothing."
    pytest.param(
        dm_from_paired(has_agent=True, agent_memory="none"),
        note(),
        refused("agent_memory_none"),
        id="agent_none",
    ),
]


@pytest.mark.parametrize(("turn_facts", "note_facts", "expected"), NOTE_TABLE)
def test_each_note_is_saved_asked_locked_or_refused_as_the_spec_says(
    turn_facts: TurnFacts, note_facts: NoteFacts, expected: tuple[str, str | None, str, bool]
) -> None:
    decision = decide_note(turn_facts, note_facts)
    assert (decision.outcome, decision.scope, decision.reason, decision.requester_only) == expected
    assert decision.message == MESSAGES[decision.reason]


def test_the_model_may_revert_its_own_note_except_under_always_confirm() -> None:
    # "To forget a note you just saved, the model calls revert_change."
    assert decide_revert(facts(save_mode="auto")).allowed
    assert decide_revert(facts(save_mode="ask")).allowed
    # "The model's own undo and forget wait for you too: revert_change is refused"
    refused = decide_revert(facts(save_mode="always"))
    assert (refused.allowed, refused.reason) == (False, "revert_locked")
    assert decide_turn(facts(save_mode="always")).tools == {"context_read", "memory_search", "propose_change"}
    assert not decide_revert(agent(save_mode="auto", agent_memory_save="always")).allowed
    # No saving, no reverting.
    assert decide_revert(facts(save_mode="never")).reason == "save_mode_never"
    assert decide_revert(facts(origin="job")).reason == "scheduled_run"
    assert decide_revert(facts(user_enabled=False)).reason == "user_off"


def answer(turn_facts: TurnFacts, **overrides: Any) -> bool:
    values: dict[str, Any] = {
        "requester_only": False,
        "answerer_paired": True,
        "answerer_can_confirm": True,
        "answerer_is_requester": False,
    }
    values.update(overrides)
    return may_answer(turn_facts, **values)


def test_only_a_paired_sender_with_the_permission_answers_in_a_chat() -> None:
    # "a sender whom you trust with the permission Confirm changes from the chat answers there"
    group = messaging()
    assert answer(group)
    # "Another sender, or one without that permission, cannot answer: the note waits in Studio for you."
    assert not answer(group, answerer_can_confirm=False)
    assert not answer(group, answerer_paired=False)


def test_under_always_confirm_only_the_paired_sender_who_asked_answers() -> None:
    # "Under Always confirm only the paired sender who asked can confirm a note, in a private chat too."
    locked = dm_from_paired(save_mode="always")
    assert not answer(locked)
    assert answer(locked, answerer_is_requester=True)
    assert not answer(locked, answerer_is_requester=True, answerer_can_confirm=False)
    # A note proposed as locked stays locked, even if the level is looser now.
    assert not answer(messaging(), requester_only=True)
    assert answer(messaging(), requester_only=True, answerer_is_requester=True)


def test_a_note_for_the_agent_needs_the_sender_who_asked_and_a_scope_still_allowed() -> None:
    # "only when the agent's memory choice allows that scope, and only after that sender confirms it"
    mine_and_own = messaging(has_agent=True, agent_memory="mine_and_own")
    assert answer(mine_and_own, requester_only=True, answerer_is_requester=True, scope="agent")
    assert not answer(mine_and_own, requester_only=True, answerer_is_requester=False, scope="agent")
    assert not answer(
        replace(mine_and_own, agent_memory="mine"),
        requester_only=True,
        answerer_is_requester=True,
        scope="agent",
    )


def test_no_chat_answer_counts_once_memory_or_saving_is_off_or_outside_messaging() -> None:
    assert not answer(messaging(user_enabled=False))
    assert not answer(messaging(messaging_save="never"))
    assert not answer(facts())


def why_not(turn_facts: TurnFacts, **overrides: Any) -> str | None:
    values: dict[str, Any] = {
        "requester_only": False,
        "answerer_paired": True,
        "answerer_can_confirm": True,
        "answerer_is_requester": False,
    }
    values.update(overrides)
    reason = answer_refusal(turn_facts, **values)
    assert (reason is None) == may_answer(turn_facts, **{k: v for k, v in values.items() if k != "locked"})
    assert reason is None or reason in MESSAGES
    return reason


def test_an_answer_that_does_not_count_says_why() -> None:
    # A bot tells the sender the real reason, not always "you cannot confirm notes".
    assert why_not(messaging()) is None
    assert why_not(messaging(user_enabled=False)) == "user_off"
    assert why_not(messaging(messaging_save="never")) == "messaging_never"
    assert why_not(messaging(save_mode="never")) == "save_mode_never"
    assert why_not(facts()) == "answer_outside_messaging"
    assert why_not(messaging(), answerer_can_confirm=False) == "answer_needs_confirmer"
    assert why_not(messaging(), answerer_paired=False) == "answer_needs_confirmer"
    assert why_not(messaging(), scope="user", answerer_paired=False) == "sender_not_paired"
    assert why_not(messaging(), scope="agent") == "scope_not_allowed"
    # "Under Always confirm only the paired sender who asked can confirm a note"
    assert why_not(messaging(save_mode="always")) == "answer_requester_only"
    assert why_not(messaging(save_mode="always"), answerer_is_requester=True) is None
    # Proposed under Always confirm, the level looser now: still the one who asked, and still that reason.
    assert why_not(messaging(), requester_only=True, locked=True) == "answer_requester_only"
    # A note beyond this conversation: only the one who asked, for that reason.
    assert why_not(messaging(), requester_only=True, scope="user") == "confirm_other_scope"


def test_a_proposal_lives_24_hours_and_an_undo_30_minutes() -> None:
    # "it expires after 24 hours" / "undo takes a saved note back for 30 minutes"
    assert PROPOSAL_TTL == timedelta(hours=24)
    assert UNDO_WINDOW == timedelta(minutes=30)
    assert MAX_AUTO_SAVES_PER_REPLY == 5
    assert LONG_NOTE_CHARS == 500
    start = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    assert not proposal_expired(created_at=start, now=start + timedelta(hours=23, minutes=59, seconds=59))
    assert proposal_expired(created_at=start, now=start + timedelta(hours=24))
    assert undo_open(saved_at=start, now=start + timedelta(minutes=29, seconds=59))
    assert not undo_open(saved_at=start, now=start + timedelta(minutes=30))


def test_the_strictest_level_wins() -> None:
    # "The strictest wins, in this order: auto is the loosest, then ask, then always, then never."
    assert strictest("auto", "ask") == "ask"
    assert strictest("always", "ask", "auto") == "always"
    assert strictest("never", "always") == "never"
    assert strictest() == "auto"


SECRETS = [
    "key sk-proj-4f9Xk2LmQ8rT1vZ7yB3n",
    "sk-ant-api03-abcdefghijklmnopqrstuv",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKl",
    "AKIAIOSFODNN7EXAMPLE",
    "password: hunter2",
    "My password is correct-horse-battery",
    "Passwort: geheim123",
    "PIN: 4821",
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "card 4111 1111 1111 1111",
    "visa 4012-8888-8888-1881",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "token Zx9Kq2LmP7vB4nR8tY1wQ6eA3sD5fG0h",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    # said the way people say them: words between the name and the value, or no "is" at all
    "my password for netflix is swordfish",
    "uses the password Tr0ub4dor&3 everywhere",
    "my password hunter2",
    "home wifi password hunter22",
    "wifi pw: hunter2",
    "login: bob / pass: hunter2",
    "my pin number is 4821",
    "my bank PIN 4821",
    "wifi key is abcd1234",
    "The API key for weather is 3f9a8b7c",
    "bank login: bob / pass: hunter2, PIN 4821",
    # in the languages people write notes in
    "Mein Netflix-Passwort ist Sonnenblume",
    "Das Passwort lautet Sonnenblume",
    "Kennwort: Sonnenblume",
    "Mein WLAN-Schlüssel ist abcd1234",
    "Mon mot de passe Netflix est tournesol",
    "Mi contraseña de Netflix es girasol",
    "A senha do wifi é girassol",
    "Mijn wachtwoord is zonnebloem",
    "Mitt lösenord är solros",
    "Пароль: подсолнух",
    "パスワードはhunter2",
    "密码：hunter2",
    "كلمة المرور: hunter2",
    "Mein Netflixpasswort ist sonnenschein",
    "Mein Bankkennwort lautet Sommerwind",
    "我的密码是hunter2abc",
    "비밀번호는 sunshine",
    "Мой пароль — sunshine",
]
NOT_SECRETS = [
    "home: lives in Rome -> home.md",
    "Prefers metric units and answers in Italian.",
    "Is vegetarian since 2019; allergic to peanuts.",
    "Works on /Users/JohnSmith/Documents/Project2024",
    "Favourite video https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    "The secret ingredient is love",
    "Born 1990-05-06, phone +39 06 1234 5678",
    "card ends in 4111 1111 1111 1112",
    "getUserAccountSettingsFromDatabase is the slow call",
    "the pin is on the map",
    "keeps every password in a password manager",
    "pinned 3 photos to the board",
    "the passenger in seat 12A",
    "spends summers in Passau since 2019",
    "collects enamel pins since 2019",
    "boarding pass: 14B",
    "changed my password in 2023",
    "Wechselt das Passwort jeden Monat",
    "Weiß nicht, wo der WLAN-Schlüssel ist",
    "es war einmal ein Garten",
    "Das Passwortgesetz ist streng",
]


@pytest.mark.parametrize("text", SECRETS)
def test_it_spots_keys_passwords_private_keys_and_card_numbers(text: str) -> None:
    assert looks_secret(text)


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_it_lets_ordinary_notes_through(text: str) -> None:
    assert not looks_secret(text)


def test_a_note_built_from_its_text_carries_its_length_and_whether_it_looks_secret() -> None:
    plain = NoteFacts.of("home: lives in Rome", scope=None, saved_in_this_reply=0)
    assert (plain.length, plain.looks_secret) == (19, False)
    assert (
        decide_note(
            facts(save_mode="auto"), NoteFacts.of("password: x1", scope=None, saved_in_this_reply=0)
        ).outcome
        == "ask"
    )


def test_a_topic_that_holds_a_secret_makes_the_note_look_secret_without_counting_in_its_length() -> None:
    for topic in ("sk-abcdefghijklmnopqrstuvwx", "pin-4821", "password-hunter2"):
        note = NoteFacts.of("my code for the bank", scope=None, saved_in_this_reply=0, topic=topic)
        assert (note.length, note.looks_secret) == (20, True), topic
        assert decide_note(facts(save_mode="auto"), note).reason == "looks_secret"
    for topic in ("home", "wifi-password", "bank-pin", "trip-2025-japan", "shoe-size-44", "pins-since-2019"):
        assert not NoteFacts.of("x", scope=None, saved_in_this_reply=0, topic=topic).looks_secret, topic


def test_facts_with_a_value_the_policy_does_not_know_are_refused() -> None:
    with pytest.raises(ValueError, match="save_mode"):
        facts(save_mode="sometimes")
    with pytest.raises(ValueError, match="origin"):
        facts(origin="email")
    with pytest.raises(ValueError, match="scope"):
        note("everyone")


def test_every_off_line_and_save_line_has_a_sentence_for_the_user() -> None:
    decision = decide_turn(facts(provider="addon_unavailable"))
    assert decision.fix == MESSAGES["memory_provider_unavailable"]
    assert decide_turn(facts(save_mode="never")).save_message == MESSAGES["save_mode_never"]
    assert decide_turn(facts(provider="addon")).served_by == "addon"
    assert decide_turn(facts()).served_by == "builtin"


# --------------------------------------------------------------------------------------------------------
# The whole input space, against an oracle written plainly from the spec (no helper of the module).
# --------------------------------------------------------------------------------------------------------

RANK = {"auto": 0, "ask": 1, "always": 2, "never": 3}

# The spec's table "Memory for each agent": what the chat reads (outside messaging apps) and where notes go.
CHOICES: dict[str, tuple[set[str], tuple[str, ...]]] = {
    "no agent": ({"user"}, ("user",)),
    "mine_and_own": ({"user", "agent"}, ("agent",)),
    "own": ({"agent"}, ("agent",)),
    "mine": ({"user"}, ("user",)),
    "as before": ({"user", "agent"}, ("user", "agent")),
}


def oracle_turn(v: dict[str, Any]) -> dict[str, Any]:
    """What the spec says about a turn, from the raw values ``v`` of its facts."""
    agent_on = v["has_agent"]
    choice = "no agent"
    if agent_on:
        choice = "as before" if v["agent_memory"] is None else v["agent_memory"]

    off: tuple[str, str] | None = None
    if v["origin"] == "subagent":
        off = ("subagent", "run")
    elif v["private_chat"]:
        off = ("private_chat", "chat")
    elif agent_on and not v["agent_tools_memory"]:
        off = ("agent_tools_off", "agent")
    elif choice == "none":
        off = ("agent_memory_none", "agent")
    elif choice == "as before" and not v["agent_addons_memory"]:
        off = ("agent_addons_no_memory", "agent")
    elif v["user_enabled"] is False or v["provider"] == "off":
        off = ("user_off", "user")
    elif v["user_enabled"] is None:
        off = ("user_setting_unreadable", "user")
    elif not v["server_files_on"]:
        off = ("server_files_off", "server")
    elif v["provider"] == "addon_unavailable":
        off = ("memory_provider_unavailable", "provider")
    elif v["provider"] == "addon" and not v.get("addon_namespaces") and agent_on and choice != "mine":
        # An add-on of one store for every chat cannot keep to an agent's choice beyond the user's notes.
        off = ("memory_provider_one_store", "provider")
    if off:
        return {
            "memory_on": False,
            "code": off[0],
            "blocked_by": off[1],
            "read_scopes": set(),
            "tools": set(),
            "propose_scopes": (),
            "default_scope": None,
            "effective_level": "never",
            "save_code": off[0],
        }

    reads, writes = CHOICES[choice]
    in_messaging = v["origin"] == "messaging"
    if in_messaging:
        reads = {"user", "channel"} | ({"agent"} & reads)
        writes = ("channel", *writes) if v["sender_paired"] else ("channel",)

    user_level = v["save_mode"] or "ask"
    levels = [user_level]
    if agent_on and v["agent_memory_save"]:
        levels.append(v["agent_memory_save"])
    if in_messaging:
        row = v["messaging_save"] or "ask"
        if v["save_mode"] in ("auto", "ask"):
            levels.remove(user_level)  # with auto or ask, the row decides
        if row == "never":
            levels.append("never")
        elif row == "paired_private" and v["sender_paired"] and v["one_to_one"] is True:
            levels.append("auto")
        else:
            levels.append("ask")
    level = max(levels, key=RANK.__getitem__)

    save_code = None
    if v["origin"] in ("trigger", "job"):
        save_code = "scheduled_run"
    elif agent_on and not v["agent_grant_write"]:
        save_code = "no_write_grant"
    elif agent_on and v["agent_memory_save"] == "never":
        save_code = "agent_rule_never"
    elif v["save_mode"] == "never":
        save_code = "save_mode_never"
    elif in_messaging and v["messaging_save"] == "never":
        save_code = "messaging_never"
    if save_code:
        level = "never"
    may_save = level != "never"
    return {
        "memory_on": True,
        "code": None,
        "blocked_by": None,
        "read_scopes": reads,
        # "Always confirm … revert_change is refused": not offered either.
        "tools": (ALL_TOOLS - {"revert_change"} if level == "always" else ALL_TOOLS) if may_save else READ_TOOLS,
        "propose_scopes": writes if may_save else (),
        "default_scope": writes[0] if may_save else None,
        "effective_level": level,
        "save_code": save_code,
    }


def oracle_note(v: dict[str, Any], turn: dict[str, Any], n: dict[str, Any]) -> tuple[str, str | None]:
    """The outcome and target scope the spec gives a note ``n`` on a turn ``turn``."""
    if "propose_change" not in turn["tools"]:
        return "refuse", None
    scope = n["scope"] or turn["default_scope"]
    if scope not in turn["propose_scopes"]:
        return "refuse", None
    level = turn["effective_level"]
    one_store = v["provider"] == "addon" and not v["addon_namespaces"]
    if v["origin"] == "messaging" and (scope != "channel" or one_store) and level == "auto":
        level = "ask"  # "a note for another scope never saves at once"
    if level == "always":
        return "locked", scope
    if level == "ask":
        return "ask", scope
    waits = n["looks_secret"] or n["length"] > 500 or n["saved_in_this_reply"] >= 5 or n["is_delete"]
    # "An automatic note is one change set like any other… Every automatic note is in the audit of changes":
    # the host has neither for an add-on's note, so it waits.
    waits = waits or v["provider"] == "addon"
    return ("ask" if waits else "save_now"), scope


def agent_configs(include_tools_off: bool) -> list[dict[str, Any]]:
    """Every agent the spec distinguishes, and no agent at all."""
    configs: list[dict[str, Any]] = [
        {
            "has_agent": False,
            "agent_tools_memory": True,
            "agent_addons_memory": False,
            "agent_memory": None,
            "agent_memory_save": None,
            "agent_grant_write": True,
        }
    ]
    for tools, memory, rule, grant in itertools.product(
        (True, False) if include_tools_off else (True,),
        ("own", "mine_and_own", "mine", "none", None),
        (None, "always", "never"),
        (True, False),
    ):
        for addons in (True, False) if memory is None else (False,):
            configs.append(
                {
                    "has_agent": True,
                    "agent_tools_memory": tools,
                    "agent_addons_memory": addons,
                    "agent_memory": memory,
                    "agent_memory_save": rule,
                    "agent_grant_write": grant,
                }
            )
    return configs


def origin_configs() -> list[dict[str, Any]]:
    """Every origin; for messaging every row, pairing and one-to-one answer."""
    configs: list[dict[str, Any]] = [
        {"origin": origin, "messaging_save": "ask", "sender_paired": False, "one_to_one": None}
        for origin in ("web", "subagent", "trigger", "job")
    ]
    for row, paired, one_to_one in itertools.product(
        ("ask", "paired_private", "never", None), (True, False), (True, False, None)
    ):
        configs.append(
            {"origin": "messaging", "messaging_save": row, "sender_paired": paired, "one_to_one": one_to_one}
        )
    return configs


#: The providers the walks try: ``addon`` keeps one store, ``addon_namespaces`` keeps notes apart per namespace.
PROVIDERS = ("builtin", "off", "addon", "addon_namespaces", "addon_unavailable")


def with_provider(provider: str) -> dict[str, Any]:
    """The facts' fields for one of ``PROVIDERS``."""
    if provider == "addon_namespaces":
        return {"provider": "addon", "addon_namespaces": True}
    return {"provider": provider, "addon_namespaces": False}


def check_turn(v: dict[str, Any]) -> tuple[TurnFacts, dict[str, Any]]:
    turn_facts = TurnFacts(**v)
    decision = decide_turn(turn_facts)
    expected = oracle_turn(v)
    got = {key: getattr(decision, key) for key in expected}
    assert got == expected, v
    # Invariants of the shape of a decision.
    if not decision.memory_on:
        assert not decision.tools and not decision.read_scopes
    assert ("context_read" in decision.tools) == bool(decision.read_scopes)
    assert ("revert_change" in decision.tools) == (
        "propose_change" in decision.tools and decision.effective_level != "always")
    assert ("propose_change" in decision.tools) == (decision.effective_level != "never")
    # Conversation notes exist only in messaging chats, and every messaging chat with memory on reads them.
    assert ("channel" in decision.read_scopes) == (decision.memory_on and v["origin"] == "messaging")
    assert "channel" not in decision.propose_scopes or v["origin"] == "messaging"
    assert decision.default_scope is None or decision.default_scope in decision.propose_scopes
    assert decision.save_code is None or decision.save_message == MESSAGES[decision.save_code]
    return turn_facts, expected


def test_the_off_levels_over_the_whole_space_match_the_oracle() -> None:
    walked = 0
    for agent_values, origin_values, private, enabled, server, provider, save_mode in itertools.product(
        agent_configs(include_tools_off=True),
        origin_configs()[:5],  # web, sub-agent, trigger, job, one messaging chat
        (False, True),
        (True, False, None),
        (True, False),
        PROVIDERS,
        ("auto", "never"),
    ):
        check_turn(
            {
                **agent_values,
                **origin_values,
                "private_chat": private,
                "user_enabled": enabled,
                "server_files_on": server,
                **with_provider(provider),
                "save_mode": save_mode,
            }
        )
        walked += 1
    assert walked > 10_000


NOTE_SHAPES = [
    {"length": 40, "looks_secret": False, "saved_in_this_reply": 0, "is_delete": False},
    {"length": LONG_NOTE_CHARS, "looks_secret": False, "saved_in_this_reply": 4, "is_delete": False},
    {"length": LONG_NOTE_CHARS + 1, "looks_secret": False, "saved_in_this_reply": 0, "is_delete": False},
    {"length": 40, "looks_secret": True, "saved_in_this_reply": 0, "is_delete": False},
    {"length": 40, "looks_secret": False, "saved_in_this_reply": 5, "is_delete": False},
    {"length": 40, "looks_secret": False, "saved_in_this_reply": 0, "is_delete": True},
    {"length": 40, "looks_secret": False, "saved_in_this_reply": 0, "is_delete": True, "makes_room": True},
]


def test_every_turn_with_memory_on_and_every_note_match_the_oracle() -> None:
    notes = 0
    for agent_values, origin_values, save_mode, provider in itertools.product(
        agent_configs(include_tools_off=False),
        origin_configs(),
        ("auto", "ask", "always", "never", None),
        ("builtin", "addon", "addon_namespaces"),
    ):
        v = {
            **agent_values,
            **origin_values,
            "private_chat": False,
            "user_enabled": True,
            "server_files_on": True,
            **with_provider(provider),
            "save_mode": save_mode,
        }
        turn_facts, turn = check_turn(v)

        revert = decide_revert(turn_facts)
        assert revert.allowed == ("revert_change" in turn["tools"] and turn["effective_level"] != "always")

        # An add-on of one store serves every chat from it: in a messaging chat that is more than the conversation.
        one_store = provider == "addon"
        for scope, shape in itertools.product((None, "user", "agent", "channel"), NOTE_SHAPES):
            n: dict[str, Any] = {"scope": scope, **shape}
            decision = decide_note(turn_facts, NoteFacts(**n))
            outcome, target = oracle_note(v, turn, n)
            assert (decision.outcome, decision.scope) == (outcome, target), (v, n)
            assert decision.requester_only == (
                outcome == "locked"
                or (outcome == "ask" and v["origin"] == "messaging" and (target != "channel" or one_store))
            )
            # The host's own make-room delete says so whenever it waits, asked or locked.
            if n.get("makes_room") and outcome in ("ask", "locked"):
                assert (decision.reason, decision.message) == ("make_room", MESSAGES["make_room"]), (v, n)
            # Never looser than the turn's level.
            if turn["effective_level"] != "auto":
                assert decision.outcome != "save_now"
            notes += 1

        if v["origin"] == "messaging":
            for requester_only, paired, can_confirm, is_requester in itertools.product(
                (False, True), repeat=4
            ):
                got = may_answer(
                    turn_facts,
                    requester_only=requester_only,
                    answerer_paired=paired,
                    answerer_can_confirm=can_confirm,
                    answerer_is_requester=is_requester,
                )
                saving = oracle_turn({**v, "sender_paired": paired})["effective_level"]
                expected = (
                    saving != "never"
                    and paired
                    and can_confirm
                    and (is_requester or not (requester_only or saving == "always"))
                )
                assert got == expected, (v, requester_only, paired, can_confirm, is_requester)
    assert notes > 100_000
