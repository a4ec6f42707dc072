"""Properties of the memory policy that must hold for any input, checked with hypothesis.

Each property is a promise of spec/short-memory.md to the user: nothing is looser than what they chose, a
sub-agent or a scheduled run never saves, memory off means nothing at all, a message from outside never
saves at once except in the one case the user allowed, a secret never saves at once, and an agent can never
widen the user's choice. No database: the policy is pure.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from localai_memory.memory.policy import (
    LONG_NOTE_CHARS,
    AgentRule,
    NoteFacts,
    Origin,
    TurnFacts,
    decide_note,
    decide_revert,
    decide_turn,
    decide_typed_note,
    looks_secret,
)

RANK = {"auto": 0, "ask": 1, "always": 2, "never": 3}
OUTCOME_RANK = {"save_now": 0, "ask": 1, "locked": 2, "refuse": 3}

turn_facts = st.builds(
    TurnFacts,
    private_chat=st.booleans(),
    has_agent=st.booleans(),
    agent_tools_memory=st.booleans(),
    agent_addons_memory=st.booleans(),
    agent_memory=st.sampled_from(["own", "mine_and_own", "mine", "none", None]),
    agent_memory_save=st.sampled_from(["always", "never", None]),
    agent_grant_write=st.booleans(),
    user_enabled=st.sampled_from([True, False, None]),
    save_mode=st.sampled_from(["auto", "ask", "always", "never", None]),
    messaging_save=st.sampled_from(["ask", "paired_private", "never", None]),
    server_files_on=st.booleans(),
    provider=st.sampled_from(["builtin", "off", "addon", "addon_unavailable"]),
    addon_namespaces=st.booleans(),
    origin=st.sampled_from(["web", "messaging", "subagent", "trigger", "job"]),
    sender_paired=st.booleans(),
    one_to_one=st.sampled_from([True, False, None]),
)
# Mostly turns where memory is on, so the interesting rules are reached often.
memory_on_facts = turn_facts.map(
    lambda f: replace(f, private_chat=False, user_enabled=True, server_files_on=True, provider="builtin")
)
any_facts = st.one_of(turn_facts, memory_on_facts)
note_facts = st.builds(
    NoteFacts,
    scope=st.sampled_from(["user", "agent", "channel", None]),
    length=st.integers(min_value=0, max_value=2000),
    looks_secret=st.booleans(),
    saved_in_this_reply=st.integers(min_value=0, max_value=10),
    is_delete=st.booleans(),
    makes_room=st.booleans(),
)

# The whole space is walked in test_policy.py; these properties sample it, so a modest count suffices.
fast = settings(max_examples=150, deadline=None)


def users_own_level(f: TurnFacts) -> str:
    """The level the user chose for this kind of chat: their save mode, and in a messaging chat with
    "auto"/"ask" the messaging row (its paired_private case counting as "auto")."""
    mode = f.save_mode or "ask"
    if f.origin != "messaging" or f.save_mode is None or mode in ("always", "never"):
        return mode
    return {"ask": "ask", "never": "never", "paired_private": "auto", None: "ask"}[f.messaging_save]


@fast
@given(any_facts, note_facts)
def test_nothing_is_ever_looser_than_the_users_level(f: TurnFacts, n: NoteFacts) -> None:
    turn = decide_turn(f)
    assert RANK[turn.effective_level] >= RANK[users_own_level(f)]
    decision = decide_note(f, n)
    if decision.outcome == "save_now":
        assert users_own_level(f) == "auto"
    if users_own_level(f) in ("always", "never"):
        assert decision.outcome in ("locked", "refuse")
    if (f.save_mode or "ask") == "never":
        assert decision.outcome == "refuse"
        assert "propose_change" not in turn.tools


@fast
@given(any_facts, note_facts)
def test_a_note_is_never_looser_than_the_turns_level(f: TurnFacts, n: NoteFacts) -> None:
    turn = decide_turn(f)
    decision = decide_note(f, n)
    least = {"auto": "save_now", "ask": "ask", "always": "locked", "never": "refuse"}[turn.effective_level]
    assert OUTCOME_RANK[decision.outcome] >= OUTCOME_RANK[least]


@fast
@given(any_facts, note_facts)
def test_a_sub_agent_never_reads_or_saves(f: TurnFacts, n: NoteFacts) -> None:
    f = replace(f, origin="subagent")
    turn = decide_turn(f)
    assert not turn.read_scopes
    assert not turn.tools
    assert decide_note(f, n).outcome == "refuse"
    assert not decide_revert(f).allowed


@fast
@given(any_facts, note_facts, st.sampled_from(["trigger", "job"]))
def test_a_scheduled_run_never_saves(f: TurnFacts, n: NoteFacts, origin: Origin) -> None:
    f = replace(f, origin=origin)
    turn = decide_turn(f)
    assert "propose_change" not in turn.tools
    assert "revert_change" not in turn.tools
    assert "channel" not in turn.read_scopes
    assert decide_note(f, n).outcome == "refuse"
    assert not decide_revert(f).allowed


@fast
@given(any_facts, note_facts)
def test_memory_off_means_no_tools_no_notes_and_no_saving(f: TurnFacts, n: NoteFacts) -> None:
    turn = decide_turn(f)
    if not turn.memory_on:
        assert not turn.tools
        assert not turn.read_scopes
        assert turn.code is not None and turn.blocked_by is not None and turn.fix
        assert decide_note(f, n).outcome == "refuse"
    off_somewhere = (
        f.private_chat
        or f.user_enabled is not True
        or f.provider in ("off", "addon_unavailable")
        or not f.server_files_on
    )
    if off_somewhere:
        assert not turn.memory_on
    # An add-on of one store never serves an agent whose choice reaches beyond the user's notes.
    if f.provider == "addon" and not f.addon_namespaces and f.has_agent and f.agent_memory != "mine":
        assert not turn.memory_on


@fast
@given(any_facts, note_facts)
def test_a_messaging_chat_saves_at_once_only_for_a_paired_sender_in_a_known_dm_to_its_conversation(
    f: TurnFacts, n: NoteFacts
) -> None:
    f = replace(f, origin="messaging")
    decision = decide_note(f, n)
    if decision.outcome == "save_now":
        assert f.messaging_save == "paired_private"
        assert f.sender_paired
        assert f.one_to_one is True
        assert decision.scope == "channel"
        assert f.save_mode in ("auto", "ask")
    if decision.scope in ("user", "agent"):
        assert f.sender_paired
        assert decision.outcome in ("ask", "locked")
        assert decision.requester_only


@fast
@given(any_facts, note_facts)
def test_a_secret_never_saves_at_once(f: TurnFacts, n: NoteFacts) -> None:
    assert decide_note(f, replace(n, looks_secret=True)).outcome != "save_now"


@fast
@given(any_facts, note_facts)
def test_a_long_note_a_delete_or_a_sixth_save_never_saves_at_once(f: TurnFacts, n: NoteFacts) -> None:
    assert decide_note(f, replace(n, length=max(n.length, 501))).outcome != "save_now"
    assert decide_note(f, replace(n, is_delete=True)).outcome != "save_now"
    assert decide_note(f, replace(n, saved_in_this_reply=max(n.saved_in_this_reply, 5))).outcome != "save_now"


@fast
@given(any_facts, note_facts)
def test_a_make_room_delete_is_decided_as_any_delete_and_says_why_whenever_it_waits(
    f: TurnFacts, n: NoteFacts
) -> None:
    plain = decide_note(f, replace(n, is_delete=True, makes_room=False))
    room = decide_note(f, replace(n, is_delete=True, makes_room=True))
    assert (room.outcome, room.scope, room.requester_only) == (plain.outcome, plain.scope, plain.requester_only)
    assert room.reason == ("make_room" if room.outcome in ("ask", "locked") else plain.reason)


@fast
@given(any_facts, note_facts)
def test_an_agent_can_never_widen_the_users_choice(f: TurnFacts, n: NoteFacts) -> None:
    with_agent = replace(f, has_agent=True)
    without_agent = replace(f, has_agent=False)
    turn, plain = decide_turn(with_agent), decide_turn(without_agent)
    assert RANK[turn.effective_level] >= RANK[plain.effective_level]
    if not plain.memory_on:
        assert not turn.memory_on
        assert not turn.read_scopes and not turn.tools
    # Reads an agent adds are its own notes only; it never reads a conversation the chat would not.
    assert turn.read_scopes - plain.read_scopes <= {"agent"}
    # A note that names no scope is never treated more loosely because of the agent.
    default = replace(n, scope=None)
    assert (
        OUTCOME_RANK[decide_note(with_agent, default).outcome]
        >= OUTCOME_RANK[decide_note(without_agent, default).outcome]
    )


@fast
@given(any_facts, st.sampled_from(["always", "never"]))
def test_the_agents_rule_only_makes_saving_stricter(f: TurnFacts, rule: AgentRule) -> None:
    loose = decide_turn(replace(f, agent_memory_save=None))
    strict = decide_turn(replace(f, agent_memory_save=rule))
    assert RANK[strict.effective_level] >= RANK[loose.effective_level]
    assert strict.read_scopes == loose.read_scopes


@fast
@given(any_facts)
def test_always_confirm_refuses_the_models_revert(f: TurnFacts) -> None:
    for locked in (replace(f, save_mode="always"), replace(f, has_agent=True, agent_memory_save="always")):
        assert not decide_revert(locked).allowed
        assert "revert_change" not in decide_turn(locked).tools  # nor offered


@fast
@given(turn_facts, st.sampled_from(["web", "subagent", "trigger", "job"]))
def test_messaging_facts_do_not_matter_outside_messaging(f: TurnFacts, origin: Origin) -> None:
    f = replace(f, origin=origin)
    assert decide_turn(f) == decide_turn(
        replace(f, messaging_save="paired_private", sender_paired=True, one_to_one=True)
    )
    assert decide_turn(f) == decide_turn(
        replace(f, messaging_save="never", sender_paired=False, one_to_one=None)
    )


def luhn_complete(body: str) -> str:
    """``body`` with the check digit that makes it pass the Luhn test."""
    total = 0
    for position, char in enumerate(reversed(body)):
        digit = int(char)
        if position % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return body + str((10 - total % 10) % 10)


WORDS = [
    "lives",
    "in",
    "Rome",
    "eats",
    "no",
    "meat",
    "answers",
    "in",
    "Italian",
    "uses",
    "metric",
    "units",
    "works",
    "at",
    "the",
    "harbour",
    "since",
    "2019",
]
prose = st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join)
alnum = st.text(
    alphabet=st.sampled_from(list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")),
    min_size=20,
    max_size=40,
)
secrets = st.one_of(
    alnum.map(lambda s: "sk-" + s),
    alnum.map(lambda s: "ghp_" + s),
    alnum.map(lambda s: "xoxb-" + s),
    st.text(alphabet=st.sampled_from(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")), min_size=16, max_size=16).map(
        lambda s: "AKIA" + s
    ),
    st.text(alphabet=st.sampled_from(list("0123456789abcdef")), min_size=32, max_size=64),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20).map(
        lambda s: "password: " + s
    ),
    st.just("-----BEGIN PRIVATE KEY-----"),
    st.text(alphabet=st.sampled_from(list("0123456789")), min_size=15, max_size=15).map(
        lambda s: luhn_complete("4" + s)
    ),
)


@fast
@given(prose, secrets, prose)
def test_a_note_holding_a_key_password_or_card_number_never_saves_at_once(
    before: str, secret: str, after: str
) -> None:
    text = f"{before} {secret} {after}"
    assert looks_secret(text)
    n = NoteFacts.of(text, scope=None, saved_in_this_reply=0)
    auto = TurnFacts(
        private_chat=False,
        has_agent=False,
        agent_tools_memory=True,
        agent_addons_memory=False,
        agent_memory=None,
        agent_memory_save=None,
        agent_grant_write=True,
        user_enabled=True,
        save_mode="auto",
        messaging_save="paired_private",
        server_files_on=True,
        provider="builtin",
        origin="web",
    )
    assert decide_note(auto, n).outcome == "ask"
    assert (
        decide_note(replace(auto, origin="messaging", sender_paired=True, one_to_one=True), n).outcome
        == "ask"
    )


@fast
@given(prose)
def test_plain_prose_is_not_a_secret(text: str) -> None:
    assert not looks_secret(text)


# --- a note typed with /remember (decide_typed_note) ---------------------------------------------------------


@fast
@given(any_facts, note_facts, st.booleans())
def test_a_typed_note_is_refused_exactly_where_the_model_could_not_save_at_all(
        f: TurnFacts, n: NoteFacts, can_confirm: bool) -> None:
    typed = decide_typed_note(f, n, sender_can_confirm=can_confirm)
    turn = decide_turn(f)
    if "propose_change" not in turn.tools:
        assert typed.outcome == "refuse" and typed.reason == turn.save_code
    elif turn.served_by == "addon":
        assert typed.outcome == "refuse" and typed.reason == "typed_addon"
    else:
        assert typed.outcome != "refuse" and typed.scope == turn.default_scope


@fast
@given(memory_on_facts, note_facts, st.booleans())
def test_a_typed_note_saves_at_once_only_where_the_typists_own_yes_would_count(
        f: TurnFacts, n: NoteFacts, can_confirm: bool) -> None:
    typed = decide_typed_note(f, n, sender_can_confirm=can_confirm)
    if typed.outcome != "save_now":
        return
    assert not n.looks_secret and n.length <= LONG_NOTE_CHARS  # notes go into every prompt: seen first
    if f.origin == "messaging":
        assert f.sender_paired  # nobody else's words are ever saved at once
        assert can_confirm or (f.messaging_save == "paired_private" and f.one_to_one is True)
    else:
        assert f.origin == "web"  # a sub-agent or a run has no person typing


@fast
@given(memory_on_facts, note_facts)
def test_a_typed_note_waits_as_locked_under_always_confirm_and_is_asked_otherwise(
        f: TurnFacts, n: NoteFacts) -> None:
    typed = decide_typed_note(f, n, sender_can_confirm=False)
    if typed.outcome in ("ask", "locked"):
        always = decide_turn(f).effective_level == "always"
        assert typed.outcome == ("locked" if always else "ask") and typed.requester_only == always


def test_the_owner_typing_in_their_own_chat_saves_under_every_save_level() -> None:
    base = TurnFacts(private_chat=False, has_agent=False, agent_tools_memory=True, agent_addons_memory=False,
                     agent_memory=None, agent_memory_save=None, agent_grant_write=True, user_enabled=True,
                     save_mode="ask", messaging_save="ask", server_files_on=True, provider="builtin", origin="web")
    plain = NoteFacts.of("I live in Rome", scope=None, saved_in_this_reply=0)
    for level in ("auto", "ask", "always"):
        decision = decide_typed_note(replace(base, save_mode=level), plain)
        assert (decision.outcome, decision.scope, decision.reason) == ("save_now", "user", "typed_note")
    assert decide_typed_note(replace(base, save_mode="never"), plain).reason == "save_mode_never"
    assert decide_typed_note(replace(base, private_chat=True), plain).reason == "private_chat"
    secret = NoteFacts.of("my password is hunter22", scope=None, saved_in_this_reply=0)
    assert decide_typed_note(base, secret).outcome == "ask"
    assert decide_typed_note(replace(base, save_mode="always"), secret).outcome == "locked"


#: /remember in a messaging chat, from the rules (README "Using it"): (the user's level, the messaging row,
#: a one-to-one chat, the sender paired, may confirm) → the outcome and its reason.
TYPED_IN_MESSAGING = [
    (("ask", "ask", True, True, True), ("save_now", "typed_note")),
    (("ask", "ask", True, True, False), ("ask", "typed_needs_confirmer")),
    (("auto", "ask", False, True, True), ("save_now", "typed_note")),
    (("ask", "paired_private", True, True, False), ("save_now", "typed_note")),
    (("ask", "paired_private", False, True, False), ("ask", "typed_needs_confirmer")),
    (("ask", "paired_private", None, True, False), ("ask", "typed_needs_confirmer")),
    (("ask", "never", True, True, True), ("refuse", "messaging_never")),
    (("always", "ask", True, True, True), ("save_now", "typed_note")),
    (("always", "paired_private", True, True, False), ("locked", "typed_needs_confirmer")),
    (("never", "ask", True, True, True), ("refuse", "save_mode_never")),
    (("ask", "ask", True, False, True), ("ask", "typed_needs_confirmer")),
]


def test_a_typed_note_in_a_messaging_chat_follows_the_table() -> None:
    for (level, row, one_to_one, paired, can_confirm), expected in TYPED_IN_MESSAGING:
        facts = TurnFacts(private_chat=False, has_agent=False, agent_tools_memory=True, agent_addons_memory=False,
                          agent_memory=None, agent_memory_save=None, agent_grant_write=True, user_enabled=True,
                          save_mode=level, messaging_save=row, server_files_on=True, provider="builtin",
                          origin="messaging", sender_paired=paired, one_to_one=one_to_one)
        decision = decide_typed_note(facts, NoteFacts.of("we meet on Fridays", scope=None, saved_in_this_reply=0),
                                     sender_can_confirm=can_confirm)
        assert (decision.outcome, decision.reason) == expected, (level, row, one_to_one, paired, can_confirm)
        if decision.outcome != "refuse":
            assert decision.scope == "channel"
