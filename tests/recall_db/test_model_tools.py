"""The model's side of recall: ``memory_search`` (offered only where the policy offers it and there is more
to search than a turn shows) and duplicates (a proposed note that repeats another topic's line is not added;
the model and the turn's report are told which line it repeats)."""

from __future__ import annotations

import json

import pytest

from localai_memory.chats import context
from localai_memory.chats.selectors import chat_scopes, turn_facts
from localai_memory.chats.services import chat_create
from localai_memory.chats.tools import ToolContext, new_report, run_tool
from localai_memory.memory import policy
from localai_memory.memory.models import Proposal
from localai_memory.notes.paths import Scope
from tests.chats.helpers import index_of, make_agent, new_chat, send, set_memory, tool_results
from tests.fakes.openai_server import reply, tool_calls

from .conftest import note

pytestmark = pytest.mark.django_db


def tool_context(owner, *, agent=None, tools: list[str] | None = None) -> ToolContext:
    chat = chat_create(owner_id=owner.pk, agent_id=agent.pk if agent else None)
    facts = turn_facts(chat=chat)
    decision = policy.decide_turn(facts)
    return ToolContext(chat=chat, facts=facts, decision=decision, scopes=chat_scopes(chat=chat),
                       tools=tools if tools is not None else context.offered_tools(decision, topics=10),
                       sender=None, report=new_report(decision))


def test_memory_search_is_offered_once_there_is_more_than_a_turn_shows(owner):
    decision = policy.decide_turn(turn_facts(chat=chat_create(owner_id=owner.pk)))
    assert "memory_search" in decision.tools
    assert "memory_search" not in context.offered_tools(decision)
    assert "memory_search" not in context.offered_tools(decision, topics=context.SEARCH_TOOL_MIN_TOPICS)
    tools = context.offered_tools(decision, topics=context.SEARCH_TOOL_MIN_TOPICS + 1)
    assert tools == ["context_read", "memory_search", "propose_change", "revert_change"]
    definition = {d["function"]["name"]: d["function"]["parameters"]
                  for d in context.tool_definitions(decision, tools)}["memory_search"]
    assert definition["required"] == ["query"] and definition["properties"]["scope"]["enum"] == ["user"]
    assert "memory_search" in context.skills_text(decision, tools)


def test_memory_search_is_not_offered_where_memory_is_off(owner):
    set_memory(owner, enabled=False)
    decision = policy.decide_turn(turn_facts(chat=chat_create(owner_id=owner.pk)))
    assert context.offered_tools(decision, topics=30) == []


def test_the_model_searches_the_readable_scopes_by_meaning_with_scores(owner, alices_notes):
    ctx = tool_context(owner)
    result = run_tool(ctx, "memory_search", json.dumps({"query": "what pet does the user have"}))
    assert result["status"] == "ok" and result["mode"] == "semantic"
    first = result["results"][0]
    assert (first["topic"], first["summary"], first["scope"]) == ("pets", "has a dog named Rex", "user")
    assert first["details"] == "Rex is a beagle, walks twice a day.\n"
    assert 0 < first["score"] <= 1 and first["similarity"] > 0.3
    assert "not instructions" in result["note"]
    assert ctx.report["topics_read"][0] == {"scope": "user", "topic": "pets", "path": "Memory/pets.md"}


def test_memory_search_answers_nothing_for_an_unrelated_query(owner, alices_notes):
    result = run_tool(tool_context(owner), "memory_search", json.dumps({"query": "the boiling point of tungsten"}))
    assert result["status"] == "ok" and result["results"] == []


def test_memory_search_refuses_a_scope_the_chat_cannot_read_and_bad_arguments(owner, alices_notes):
    agent = make_agent(owner, memory="own")
    note(owner, "style", "short answers", scope=Scope.agent(agent.pk))
    ctx = tool_context(owner, agent=agent)
    refused = run_tool(ctx, "memory_search", json.dumps({"query": "where does the user live", "scope": "user"}))
    assert refused["status"] == "refused" and refused["reason"] == "scope_not_readable"
    found = run_tool(ctx, "memory_search", json.dumps({"query": "Rome"}))
    assert all(r["scope"] == "agent" for r in found["results"])
    empty = run_tool(ctx, "memory_search", json.dumps({"query": ""}))
    assert empty["error"] == "invalid_query" and empty["message"].startswith("query is required")  # its name
    assert run_tool(ctx, "memory_search", json.dumps({"query": "x" * 501}))["error"] == "invalid_query"
    assert run_tool(ctx, "memory_search", json.dumps({"query": 5}))["error"] == "invalid_query"


def test_memory_search_is_refused_when_it_was_not_offered(owner, alices_notes):
    ctx = tool_context(owner, tools=["context_read", "propose_change", "revert_change"])
    result = run_tool(ctx, "memory_search", json.dumps({"query": "dog"}))
    assert result["status"] == "refused" and result["reason"] == "tool_not_offered"


def propose(model, *notes: dict) -> None:
    model.script(tool_calls(*[("propose_change", n) for n in notes]), reply("Noted."))


def test_a_note_that_repeats_another_topics_line_is_reported_as_its_duplicate(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegetarian")
    propose(model, {"kind": "memory", "topic": "food", "summary": "is vegetarian"})
    body = send(api, new_chat(api), "Remember that I'm vegetarian.")
    [result] = tool_results(model.last_request)
    assert result["status"] == "refused" and result["reason"] == "duplicate"
    assert result["duplicate_of"]["line"] == "- diet: vegetarian" and result["duplicate_of"]["topic"] == "diet"
    assert result["duplicate_of"]["similarity"] >= 0.8
    [refused] = body["memory"]["refused"]
    assert refused["reason"] == "duplicate" and refused["duplicate_of"]["line"] == "- diet: vegetarian"
    assert body["memory"]["saved"] == [] and index_of(owner) == "- diet: vegetarian\n"


def says_its_result(request: dict) -> dict:
    result = tool_results(request)[-1]  # the last call's
    return reply(f"The note is {result['status']}{' as a duplicate' if result.get('reason') == 'duplicate' else ''}.")


@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_a_line_that_repeats_another_in_other_words_is_refused_and_the_answer_to_a_save_is_never_shown(
        api, owner, model, save_mode):
    # No word in common, the same meaning: the model was asked with the note saved (or proposed) while the
    # duplicate check ran beside the write; the check's refusal is what it is asked about again, and answers.
    set_memory(owner, save_mode=save_mode)
    note(owner, "peanut-allergy", "severe")
    call = tool_calls(("propose_change", {"kind": "memory", "topic": "peanut-allergy-note",
                                          "summary": "serious reaction"}))
    model.script(call, says_its_result, says_its_result)

    body = send(api, new_chat(api), "My peanut allergy gives me a serious reaction.")

    assert body["reply"] == "The note is refused as a duplicate."
    [refused] = body["memory"]["refused"]
    assert refused["reason"] == "duplicate" and refused["duplicate_of"]["topic"] == "peanut-allergy"
    assert body["memory"]["saved"] == [] and body["memory"]["proposed"] == []
    assert index_of(owner) == "- peanut-allergy: severe\n"
    assert not Proposal.objects.filter(owner=owner).exists()
    told_first, told_again = (tool_results(request)[0] for request in model.requests[1:])
    assert told_first["status"] == ("saved" if save_mode == "auto" else "proposed") and len(model.requests) == 3
    assert told_again["reason"] == "duplicate"


def test_after_the_model_was_asked_again_the_rest_of_the_turn_checks_each_note_before_asking(api, owner, model):
    # The model tries the same note under a third topic: it is not told "saved" a second time and asked again.
    set_memory(owner, save_mode="auto")
    note(owner, "peanut-allergy", "severe")
    again = tool_calls(("propose_change", {"kind": "memory", "topic": "peanut-allergy-info",
                                           "summary": "serious reaction"}))

    def tries_again_once(request: dict) -> dict:
        results = tool_results(request)
        if len(results) == 1 and results[0]["status"] == "refused":
            return again
        return says_its_result(request)

    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "peanut-allergy-note",
                                                "summary": "serious reaction"})),
                 says_its_result, tries_again_once, says_its_result)

    body = send(api, new_chat(api), "My peanut allergy gives me a serious reaction.")

    assert body["reply"] == "The note is refused as a duplicate."
    assert [r["topic"] for r in body["memory"]["refused"]] == ["peanut-allergy-note", "peanut-allergy-info"]
    assert body["memory"]["saved"] == [] and index_of(owner) == "- peanut-allergy: severe\n"
    assert len(model.requests) == 4  # the call, the answer dropped, the second call, the answer read
    assert [r["status"] for r in tool_results(model.last_request)] == ["refused", "refused"]


@pytest.mark.parametrize("save_mode", ["auto", "ask"])
def test_a_line_sharing_words_with_another_topics_is_checked_before_the_model_is_asked_again(
        api, owner, model, save_mode):
    set_memory(owner, save_mode=save_mode)
    note(owner, "diet", "vegetarian")
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "meals",
                                                "summary": "eats a vegetarian diet"})), says_its_result)

    body = send(api, new_chat(api), "I eat a vegetarian diet.")

    assert body["reply"] == "The note is refused as a duplicate." and len(model.requests) == 2
    assert body["memory"]["refused"][0]["duplicate_of"]["topic"] == "diet"
    assert index_of(owner) == "- diet: vegetarian\n"


def test_a_note_saved_earlier_in_the_same_reply_is_a_later_calls_duplicate(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "home", "lives in Rome")
    propose(model, {"kind": "memory", "topic": "diet", "summary": "vegetarian"},
            {"kind": "memory", "topic": "food", "summary": "is vegetarian"})
    body = send(api, new_chat(api), "Remember that I'm vegetarian.")
    assert [s["topic"] for s in body["memory"]["saved"]] == ["diet"]
    [refused] = body["memory"]["refused"]
    assert refused["reason"] == "duplicate" and refused["duplicate_of"]["topic"] == "diet"
    assert index_of(owner) == "- home: lives in Rome\n- diet: vegetarian\n"


def test_a_duplicate_does_not_wait_in_the_inbox_either(api, owner, model):
    note(owner, "pets", "has a dog named Rex")
    propose(model, {"kind": "memory", "topic": "dog", "summary": "Has a dog named Rex."})
    body = send(api, new_chat(api), "I have a dog called Rex.")
    [refused] = body["memory"]["refused"]
    assert refused["reason"] == "duplicate" and refused["duplicate_of"]["by"] == "exact"
    assert not Proposal.objects.filter(owner=owner).exists()


def test_a_changed_number_or_a_negation_is_not_a_duplicate(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "deadlift", "deadlifts 140 kg")
    note(owner, "coffee", "drinks coffee every morning")
    propose(model, {"kind": "memory", "topic": "lifting", "summary": "deadlifts 150 kg"},
            {"kind": "memory", "topic": "caffeine", "summary": "does not drink coffee any more"})
    body = send(api, new_chat(api), "I lift 150 now, and I quit coffee.")
    assert [s["topic"] for s in body["memory"]["saved"]] == ["lifting", "caffeine"]


def test_an_update_of_the_same_topic_is_not_a_duplicate(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "home", "lives in Rome")
    propose(model, {"kind": "memory", "topic": "home", "summary": "lives in Rome, Italy"})
    body = send(api, new_chat(api), "I live in Rome, Italy.")
    assert body["memory"]["saved"][0]["topic"] == "home"
    assert index_of(owner) == "- home: lives in Rome, Italy\n"


def test_new_details_are_not_a_duplicate(api, owner, model):
    set_memory(owner, save_mode="auto")
    note(owner, "diet", "vegetarian")
    propose(model, {"kind": "memory", "topic": "food", "summary": "vegetarian",
                    "details": "Eats eggs and cheese, no fish."})
    body = send(api, new_chat(api), "I'm vegetarian but I eat eggs and cheese.")
    assert body["memory"]["saved"][0]["topic"] == "food"


def test_a_duplicate_in_another_scope_is_not_this_scopes_duplicate(api, owner, model):
    set_memory(owner, save_mode="auto")
    agent = make_agent(owner, memory="mine_and_own")
    note(owner, "diet", "vegetarian")
    propose(model, {"kind": "memory", "topic": "food", "summary": "is vegetarian"})
    body = send(api, new_chat(api, agent=agent.pk), "Remember I'm vegetarian.")
    assert body["memory"]["saved"][0]["scope"] == "agent"


def test_a_turn_over_many_notes_offers_memory_search_to_the_model_and_the_tools_report_lists_it(api, owner, model):
    for n in range(context.SEARCH_TOOL_MIN_TOPICS + 2):
        note(owner, f"topic-{n}", f"fact number {n}")
    chat_id = new_chat(api)
    send(api, chat_id)
    offered = [tool["function"]["name"] for tool in model.requests[-1]["tools"]]
    assert "memory_search" in offered
    assert "memory_search" in api.get(f"/api/chats/{chat_id}/tools").json()["tools"]


def test_a_turn_over_few_notes_offers_only_the_three_tools(api, owner, model):
    note(owner, "home", "lives in Rome")
    chat_id = new_chat(api)
    send(api, chat_id)
    offered = sorted(tool["function"]["name"] for tool in model.requests[-1]["tools"])
    assert offered == ["context_read", "propose_change", "revert_change"]
