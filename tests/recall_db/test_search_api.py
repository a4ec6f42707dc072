"""``GET /api/chats/memory/search?q=&scope=``: your notes that match by meaning, with scores; bad input is
a 400; nobody else's notes are ever searched."""

from __future__ import annotations

import pytest

from localai_memory.notes.paths import Scope
from tests.api.conftest import assert_error

from .conftest import note

pytestmark = pytest.mark.django_db

URL = "/api/chats/memory/search"


def test_it_finds_a_note_by_meaning_with_its_scores(api, owner, alices_notes):
    body = api.get(URL, {"q": "what kind of animal do I keep at home"}).json()
    assert body["mode"] == "semantic" and body["degraded"] is None
    first = body["results"][0]
    assert (first["topic"], first["summary"], first["path"]) == ("pets", "has a dog named Rex", "Memory/pets.md")
    assert first["details"] == "Rex is a beagle, walks twice a day.\n"
    assert 0 < first["score"] <= 1 and 0 < first["similarity"] <= 1
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)


def test_it_says_where_the_note_matched(api, owner, alices_notes):
    [result] = api.get(URL, {"q": "Trastevere"}).json()["results"]
    assert (result["topic"], result["in"], result["line"]) == (
        "home", "details", "Moved to Trastevere in 2024, a flat near the river.")


def test_an_unrelated_query_finds_nothing(api, owner, alices_notes):
    assert api.get(URL, {"q": "the capital of Mongolia"}).json()["results"] == []


def test_a_scope_narrows_the_search(api, owner):
    note(owner, "home", "lives in Rome")
    note(owner, "style", "answers about Rome in Italian", scope=Scope.agent(12))
    everything = api.get(URL, {"q": "Rome"}).json()["results"]
    assert {r["scope"] for r in everything} == {"user", "agent"}
    agent_only = api.get(URL, {"q": "Rome", "scope": "agent:12"}).json()["results"]
    assert [(r["scope"], r["key"], r["topic"]) for r in agent_only] == [("agent", "12", "style")]
    assert [r["scope"] for r in api.get(URL, {"q": "Rome", "scope": "user"}).json()["results"]] == ["user"]


@pytest.mark.parametrize("params", [{}, {"q": ""}, {"q": "   "}, {"q": "x" * 501}, {"q": "Rome", "scope": "team"},
                                    {"q": "Rome", "scope": "agent:abc"}, {"q": "Rome", "limit": "0"},
                                    {"q": "Rome", "limit": "many"}],
                         ids=["no_q", "empty", "blank", "oversized", "unknown_scope", "bad_agent", "zero_limit",
                              "bad_limit"])
def test_bad_input_is_a_400(api, owner, params):
    assert_error(api.get(URL, params), 400)


def test_an_outsider_never_finds_alices_notes(api, owner, outsider, outsider_api, alices_notes):
    assert outsider_api.get(URL, {"q": "Trastevere"}).json()["results"] == []
    assert outsider_api.get(URL, {"q": "dog named Rex", "scope": "user"}).json()["results"] == []
    note(outsider, "home", "lives in Paris")
    theirs = outsider_api.get(URL, {"q": "Where do I live?"}).json()["results"]
    assert [r["summary"] for r in theirs] == ["lives in Paris"]
    mine = api.get(URL, {"q": "Where do I live?"}).json()["results"]
    assert "lives in Paris" not in [r["summary"] for r in mine]


def test_a_scope_of_another_users_agent_or_bot_or_of_none_is_a_404(api, owner, outsider, outsider_api):
    """As on every other route: a scope that is not yours is "not found", not an empty list that says nothing
    matched."""
    from bridges.models import Binding
    from localai_memory.agents.models import Agent

    theirs = Agent.objects.create(owner=outsider, name="Chef")
    bot = Binding.objects.create(owner=outsider, platform="telegram", name="Home bot", mode="polling")
    note(outsider, "style", "answers about Rome in Italian", scope=Scope.agent(theirs.pk))
    note(outsider, "team", "Friday demos in Rome", scope=Scope.channel(bot.pk, "C1"))
    for scope in (f"agent:{theirs.pk}", Scope.channel(bot.pk, "C1").name, "agent:99999"):
        assert_error(api.get(URL, {"q": "Rome", "scope": scope}), 404, "not_found")
    mine = Agent.objects.create(owner=owner, name="Cook")
    assert api.get(URL, {"q": "Rome", "scope": f"agent:{mine.pk}"}).json()["results"] == []  # yours, no notes
    assert [r["topic"] for r in outsider_api.get(URL, {"q": "Rome", "scope": f"agent:{theirs.pk}"}).json()[
        "results"]] == ["style"]


def test_it_needs_a_signed_in_user(anon_api):
    assert anon_api.get(URL, {"q": "Rome"}).status_code in (401, 403)


def test_of_two_equally_relevant_notes_the_one_you_typed_ranks_above_the_one_the_model_saved(api, owner):
    from localai_memory.agents.models import Agent

    agent = Agent.objects.create(owner=owner, name="Chef")
    # The same words: saved first by the model on its own in your notes, then typed by you in the agent's.
    note(owner, "pets", "has a grey cat named Pixel", source="model")
    note(owner, "pets", "has a grey cat named Pixel", scope=Scope.agent(agent.pk))
    results = api.get(URL, {"q": "what is my cat called"}).json()["results"]
    assert [r["path"] for r in results[:2]] == [f"Memory/agents/{agent.pk}/index.md", "Memory/index.md"]
    assert results[0]["similarity"] == pytest.approx(results[1]["similarity"], abs=1e-4)
    assert results[0]["score"] > results[1]["score"]
