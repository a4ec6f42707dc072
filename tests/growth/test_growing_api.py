"""``GET/PUT /api/chats/memory/growing``: the Memory tab's switches for how memory grows, over the API —
suggestions from chats (consolidation passes) and notes proposed by MCP clients."""

from __future__ import annotations

import pytest

from localai_memory.growth.consolidation import consolidate_user
from tests.api.conftest import assert_error
from tests.fakes.openai_server import reply

from .conftest import fact, facts_reply

pytestmark = pytest.mark.django_db
URL = "/api/chats/memory/growing"
LISBON = "I moved to Lisbon last spring."


def test_suggestions_are_on_and_mcp_proposals_off_until_you_choose(api):
    assert api.get(URL).json() == {"consolidation_enabled": True, "mcp_propose_enabled": False}


def test_turning_suggestions_off_stops_the_scheduled_passes_and_a_field_left_out_stays(api, owner, model, make_chat):
    assert api.put(URL, {"consolidation_enabled": False}, format="json").json() == {
        "consolidation_enabled": False, "mcp_propose_enabled": False}
    make_chat(owner, LISBON)
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))
    scheduled = consolidate_user(owner_id=owner.pk, trigger="schedule")
    assert (scheduled.status, scheduled.reason) == ("skipped", "consolidation_off")
    assert api.put(URL, {"mcp_propose_enabled": True}, format="json").json() == {
        "consolidation_enabled": False, "mcp_propose_enabled": True}
    assert api.get("/api/chats/memory/stats").json()["memory"]["mcp_propose_enabled"] is True


@pytest.mark.parametrize(("body", "code"), [
    ({"consolidation_enabled": "no"}, None), ({"mcp_propose_enabled": 1}, None),
    ({"save_mode": "auto"}, "unknown_field"), ([True], "invalid_body")])
def test_a_value_that_is_not_allowed_is_a_400_and_changes_nothing(api, body, code):
    assert_error(api.put(URL, body, format="json"), 400, code)
    assert api.get(URL).json() == {"consolidation_enabled": True, "mcp_propose_enabled": False}


def test_each_account_has_its_own(api, outsider_api):
    api.put(URL, {"consolidation_enabled": False}, format="json")
    assert outsider_api.get(URL).json()["consolidation_enabled"] is True
