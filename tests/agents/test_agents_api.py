"""The agents API: create, read, list, update; the memory fields' 400s, keeps and clears; defaults."""

from __future__ import annotations

import pytest

from localai_memory.agents.models import Agent
from localai_memory.memory import services as memory_services

pytestmark = pytest.mark.django_db

AGENTS = "/api/chats/agents"


def error_of(response) -> dict:
    assert response["Content-Type"].startswith("application/json")
    return response.json()["error"]


# -- create ------------------------------------------------------------------------------------------------


def test_a_new_agent_written_without_memory_is_as_before(api, make_agent):
    agent = make_agent(name="Old client")
    assert agent["memory"] is None
    assert agent["memory_save"] is None
    assert Agent.objects.get(pk=agent["id"]).memory is None


def test_a_new_agent_has_the_memory_tool_and_the_remember_grant_by_default(make_agent):
    agent = make_agent()
    assert agent["tools"] == ["memory"]
    assert agent["grants"] == ["memory.write"]
    assert agent["addons"] == []
    stored = Agent.objects.get(pk=agent["id"])
    assert stored.tools_memory and stored.grant_write and not stored.addons_memory


def test_a_client_can_turn_the_memory_tool_and_the_grant_off_when_creating(make_agent):
    agent = make_agent(tools=[], grants=[], addons=["memory"])
    stored = Agent.objects.get(pk=agent["id"])
    assert (agent["tools"], agent["grants"], agent["addons"]) == ([], [], ["memory"])
    assert not stored.tools_memory and not stored.grant_write and stored.addons_memory


def test_the_form_s_choice_is_stored_with_its_rule(make_agent):
    agent = make_agent(name="Cook", instructions="Plan meals.", memory="mine_and_own", memory_save="always")
    assert (agent["memory"], agent["memory_save"]) == ("mine_and_own", "always")
    stored = Agent.objects.get(pk=agent["id"])
    assert (stored.memory, stored.memory_save, stored.instructions) == ("mine_and_own", "always", "Plan meals.")


def test_creating_answers_201_with_where_the_agent_lives(api):
    response = api.post(AGENTS, {"name": "Cook"}, format="json")
    assert response.status_code == 201
    assert response["Location"] == f"{AGENTS}/{response.json()['id']}"


@pytest.mark.parametrize("loose", ["auto", "ask"])
def test_an_agent_rule_looser_than_always_is_refused_with_a_clear_message(api, loose):
    response = api.post(AGENTS, {"name": "Loose", "memory_save": loose}, format="json")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "memory_save_not_allowed"
    assert "only be stricter" in error["message"] and "use_mine" in error["message"]
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "invalid"),  # the name is required
        ({"name": ""}, "invalid"),
        ({"name": "   "}, "invalid"),
        ({"name": "x" * 101}, "invalid"),
        ({"name": 7}, "invalid"),
        ({"name": "A", "memory": "everything"}, "invalid"),
        ({"name": "A", "memory": ["own"]}, "invalid"),
        ({"name": "A", "memory_save": "sometimes"}, "invalid_memory_save"),
        ({"name": "A", "memory_save": ""}, "invalid_memory_save"),
        ({"name": "A", "memory_save": True}, "invalid"),
        ({"name": "A", "tools": "memory"}, "invalid"),
        ({"name": "A", "tools": [1]}, "invalid"),
        ({"name": "A", "tools": ["Memory"]}, "invalid_tools"),
        ({"name": "A", "grants": {"memory.write": True}}, "invalid"),
        ({"name": "A", "addons": ["has space"]}, "invalid_addons"),
        ({"name": "A", "instructions": 3}, "invalid"),
        ({"name": "A", "colour": "blue"}, "unknown_field"),
        ({"name": "A", "id": 5}, "unknown_field"),
    ],
)
def test_bad_input_is_a_400_in_json_and_saves_nothing(api, body, code):
    response = api.post(AGENTS, body, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == code
    assert not Agent.objects.exists()


def test_a_body_that_is_not_an_object_is_a_400(api):
    response = api.post(AGENTS, ["Cook"], format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_body"


def test_a_name_exactly_100_characters_long_is_fine(make_agent):
    assert make_agent(name="n" * 100)["name"] == "n" * 100


# -- read and list ---------------------------------------------------------------------------------------


def test_reading_an_agent_gives_its_fields(api, make_agent):
    created = make_agent(name="Cook", memory="own", memory_save="never", addons=["memory"])
    response = api.get(f"{AGENTS}/{created['id']}")
    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("id", "name", "tools", "addons", "grants", "memory", "memory_save")} == {
        "id": created["id"], "name": "Cook", "tools": ["memory"], "addons": ["memory"],
        "grants": ["memory.write"], "memory": "own", "memory_save": "never",
    }


def test_the_list_shows_my_agents_by_name(api, make_agent):
    make_agent(name="Zed")
    make_agent(name="Cook")
    response = api.get(AGENTS)
    assert response.status_code == 200
    assert [a["name"] for a in response.json()["agents"]] == ["Cook", "Zed"]


# -- update: keeps and clears ----------------------------------------------------------------------------


def test_a_put_without_memory_fields_keeps_the_stored_choice_and_rule(api, make_agent):
    agent = make_agent(memory="own", memory_save="never")
    response = api.put(f"{AGENTS}/{agent['id']}", {"name": "Renamed", "instructions": "Be brief."}, format="json")
    assert response.status_code == 200
    assert (response.json()["memory"], response.json()["memory_save"]) == ("own", "never")
    stored = Agent.objects.get(pk=agent["id"])
    assert (stored.name, stored.instructions, stored.memory, stored.memory_save) == \
        ("Renamed", "Be brief.", "own", "never")


def test_an_older_client_cannot_loosen_an_agent_by_leaving_the_rule_out(api, make_agent):
    agent = make_agent(memory_save="always")
    api.put(f"{AGENTS}/{agent['id']}", {"tools": ["memory"], "grants": ["memory.write"]}, format="json")
    assert Agent.objects.get(pk=agent["id"]).memory_save == "always"


def test_use_mine_clears_the_agent_rule(api, make_agent):
    agent = make_agent(memory_save="never")
    response = api.put(f"{AGENTS}/{agent['id']}", {"memory_save": "use_mine"}, format="json")
    assert response.status_code == 200
    assert response.json()["memory_save"] is None
    assert Agent.objects.get(pk=agent["id"]).memory_save is None


def test_a_put_can_pick_a_clearer_choice_for_an_as_before_agent(api, make_agent):
    agent = make_agent()
    response = api.put(f"{AGENTS}/{agent['id']}", {"memory": "mine"}, format="json")
    assert response.json()["memory"] == "mine"


def test_the_forms_as_before_choice_comes_first_and_points_to_the_clearer_choices_below_it(
        client, owner, make_agent):
    agent = make_agent()  # without memory: as before
    client.force_login(owner)
    page = client.get(f"/agents/{agent['id']}/").content.decode()
    choices = [page.index(f'name="memory" value="{value}"') for value in ("as_before", "mine_and_own", "none")]
    assert choices == sorted(choices)  # listed first
    assert "Pick one of the clearer choices below to change that." in page and "choices above" not in page


def test_memory_null_in_a_put_sets_as_before(api, make_agent):
    agent = make_agent(memory="own")
    api.put(f"{AGENTS}/{agent['id']}", {"memory": None}, format="json")
    assert Agent.objects.get(pk=agent["id"]).memory is None


@pytest.mark.parametrize("loose", ["auto", "ask"])
def test_a_put_with_a_loose_rule_is_refused_and_keeps_the_stored_rule(api, make_agent, loose):
    agent = make_agent(memory_save="always")
    response = api.put(f"{AGENTS}/{agent['id']}", {"memory_save": loose, "name": "Sneaky"}, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "memory_save_not_allowed"
    stored = Agent.objects.get(pk=agent["id"])
    assert (stored.memory_save, stored.name) == ("always", "Helper")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"name": ""}, "invalid"),
        ({"memory": "all"}, "invalid"),
        ({"tools": None}, "invalid"),
        ({"secret": 1}, "unknown_field"),
        ({"memory_effective": {}}, "unknown_field"),
    ],
)
def test_a_bad_put_is_a_400_and_changes_nothing(api, make_agent, body, code):
    agent = make_agent(memory="own")
    response = api.put(f"{AGENTS}/{agent['id']}", body, format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == code
    stored = Agent.objects.get(pk=agent["id"])
    assert (stored.name, stored.memory, stored.tools) == ("Helper", "own", ["memory"])


def test_a_put_can_turn_the_memory_tool_off(api, make_agent):
    agent = make_agent()
    api.put(f"{AGENTS}/{agent['id']}", {"tools": ["web"]}, format="json")
    assert not Agent.objects.get(pk=agent["id"]).tools_memory


# -- the form's read-only hints --------------------------------------------------------------------------


def test_the_form_says_memory_is_off_in_your_settings_when_the_switch_is_off(api, owner, make_agent):
    agent = make_agent(memory="mine_and_own")
    memory_services.settings_update(user_id=owner.pk, enabled=False)
    hints = api.get(f"{AGENTS}/{agent['id']}").json()["memory_effective"]
    assert hints["memory_off_in_settings"] is True
    assert hints["notice"] == "Memory is off in your settings"
    assert hints["on"] is False and hints["blocked_by"] == "user"
    assert hints["reads"] == [] and hints["saves_to"] == []


def test_the_hints_say_what_each_choice_reads_and_where_a_note_goes(make_agent):
    mine_and_own = make_agent(memory="mine_and_own")["memory_effective"]
    assert mine_and_own["memory_off_in_settings"] is False and mine_and_own["notice"] is None
    assert (mine_and_own["reads"], mine_and_own["saves_to"]) == (["agent", "user"], ["agent"])
    mine = make_agent(memory="mine")["memory_effective"]
    assert (mine["reads"], mine["saves_to"]) == (["user"], ["user"])
    none = make_agent(memory="none")["memory_effective"]
    assert none["on"] is False and none["code"] == "agent_memory_none"


def test_the_hints_show_an_agent_rule_stricter_than_the_owner_s_level(make_agent):
    hints = make_agent(memory="own", memory_save="always")["memory_effective"]
    assert hints["save_level"] == "always"
    never = make_agent(memory="own", memory_save="never")["memory_effective"]
    assert never["save_level"] == "never" and never["save_code"] == "agent_rule_never"


# -- another user ----------------------------------------------------------------------------------------


def test_the_list_never_shows_another_user_s_agents(api, outsider_api, make_agent):
    make_agent(name="Alice's cook")
    outsider_api.post(AGENTS, {"name": "Mallory's spy"}, format="json")
    assert [a["name"] for a in api.get(AGENTS).json()["agents"]] == ["Alice's cook"]
    assert [a["name"] for a in outsider_api.get(AGENTS).json()["agents"]] == ["Mallory's spy"]


def test_another_user_gets_404_on_every_route_of_my_agent(outsider_api, make_agent, give_notes, owner):
    agent = make_agent(memory="own", memory_save="always")
    give_notes(owner, agent["id"], "home")
    url = f"{AGENTS}/{agent['id']}"
    responses = {
        "GET": outsider_api.get(url),
        "PUT": outsider_api.put(url, {"memory_save": "use_mine"}, format="json"),
        "DELETE": outsider_api.delete(url),
        "DELETE keep": outsider_api.delete(url + "?memory=delete"),
        "export": outsider_api.get(url + "/export"),
    }
    for route, response in responses.items():
        assert response.status_code == 404, route
        assert error_of(response)["code"] == "not_found", route
    stored = Agent.objects.get(pk=agent["id"])
    assert stored.memory_save == "always"


def test_an_unknown_agent_is_a_404_in_json(api):
    response = api.get(f"{AGENTS}/999999")
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_signed_out_callers_are_refused(anon_api, make_agent):
    agent = make_agent()
    assert anon_api.get(AGENTS).status_code == 401
    assert anon_api.get(f"{AGENTS}/{agent['id']}").status_code == 401
    assert anon_api.post(AGENTS, {"name": "x"}, format="json").status_code == 401
