"""Every save level with every agent choice and agent rule, through a real web chat turn: the note the model
proposes is saved at once (with Undo), proposed, proposed locked, or refused, in the scope the spec names."""

from __future__ import annotations

import itertools

import pytest

from localai_memory.memory.models import Proposal
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import Scope
from tests.chats.helpers import index_of, make_agent, new_chat, send, set_memory, tool_results
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}
LEVELS = ("auto", "ask", "always", "never")
STRICTNESS = {level: rank for rank, level in enumerate(LEVELS)}
#: The agent's choice → where a note that names no scope goes (spec "Memory for each agent"); None: nowhere.
WHERE = {"no agent": "user", "own": "agent", "mine_and_own": "agent", "mine": "user", "none": None,
         "as before": "user"}
CASES = [(level, choice, rule) for level, choice, rule in itertools.product(LEVELS, WHERE, (None, "always", "never"))
         if not (choice == "no agent" and rule is not None)]


def expected(level: str, choice: str, rule: str | None) -> tuple[str, str | None]:
    """(outcome, scope) written from the spec: the strictest of your level and the agent's rule wins."""
    if WHERE[choice] is None:
        return "refused", None
    strictest = max([level, rule or "auto"], key=STRICTNESS.__getitem__)
    return {"auto": "saved", "ask": "proposed", "always": "locked", "never": "refused"}[strictest], WHERE[choice]


@pytest.mark.parametrize(("level", "choice", "rule"), CASES)
def test_a_proposed_note_lands_where_and_how_the_spec_says(api, owner, model, level, choice, rule):
    set_memory(owner, save_mode=level)
    agent = None
    if choice != "no agent":
        agent = make_agent(owner, memory=None if choice == "as before" else choice, memory_save=rule,
                           addons=("memory",) if choice == "as before" else ())
    chat = new_chat(api, **({"agent": agent.pk} if agent else {}))
    model.script(tool_calls(("propose_change", VEGAN)), reply("Done."))

    body = send(api, chat, "Remember that I am vegan.")

    outcome, kind = expected(level, choice, rule)
    [result] = tool_results(model.last_request) or [{"status": "refused"}]
    scope = None if kind is None else (Scope.agent(agent.pk) if kind == "agent" else Scope.user())
    if outcome == "saved":
        assert result["status"] == "saved" and result["scope"] == kind
        assert index_of(owner, scope) == "- diet: vegan, no honey\n"
        assert ChangeSet.objects.get(pk=result["change_id"]).automatic
    elif outcome in ("proposed", "locked"):
        assert result["status"] == "proposed" and result["scope"] == kind
        proposal = Proposal.objects.get()
        assert proposal.locked is (outcome == "locked")
        assert (proposal.scope_kind, proposal.scope_key) == (scope.kind, scope.key)
        assert index_of(owner, scope) == ""
    else:
        assert result["status"] == "refused"
        assert body["memory"]["saved"] == [] and not Proposal.objects.exists()
        assert not ChangeSet.objects.filter(owner=owner).exists()
