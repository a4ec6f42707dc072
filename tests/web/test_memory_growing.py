"""The Memory tab's switches for memory that grows (suggestions from chats, proposals over MCP) and its
"Synthesize now": each sticks, each is the signed-in person's own, and turning MCP proposing on opens it."""

from __future__ import annotations

import pytest

from localai_memory.celery import app as celery_app
from localai_memory.core.errors import Forbidden
from localai_memory.growth.models import ConsolidationRun
from localai_memory.mcpserver.tools import propose as memory_propose
from localai_memory.memory.selectors import memory_state

from .conftest import signed_in

pytestmark = pytest.mark.django_db

TAB = "/settings/memory/"


def test_both_switches_start_as_documented_and_stick_after_a_reload(owner, outsider):
    client = signed_in(owner)
    page = client.get(TAB).content.decode()
    assert 'name="consolidation_enabled" checked' in page and 'name="mcp_propose_enabled" aria' in page

    saved = client.post("/settings/memory/growing/", {"mcp_propose_enabled": "on"}, follow=True)

    assert "Saved your choices for suggestions and other assistants." in saved.content.decode()
    state = memory_state(user_id=owner.pk)
    assert (state.consolidation_enabled, state.mcp_propose_enabled) == (False, True)
    page = client.get(TAB).content.decode()
    assert 'name="consolidation_enabled" aria' in page and 'name="mcp_propose_enabled" checked' in page
    theirs = memory_state(user_id=outsider.pk)
    assert (theirs.consolidation_enabled, theirs.mcp_propose_enabled) == (True, False)


def test_an_mcp_client_can_propose_only_after_the_switch_is_turned_on(owner):
    with pytest.raises(Forbidden, match="Let other assistants propose notes"):
        memory_propose(owner_id=owner.pk, topic="diet", summary="vegetarian")
    signed_in(owner).post("/settings/memory/growing/", {"consolidation_enabled": "on", "mcp_propose_enabled": "on"})
    result = memory_propose(owner_id=owner.pk, topic="diet", summary="vegetarian")
    assert result["status"] == "proposed"


def test_synthesize_now_runs_a_pass_for_the_signed_in_person(owner, outsider):
    was = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True  # the real task, run in this process
    try:
        answer = signed_in(owner).post("/settings/memory/synthesize/", follow=True)
    finally:
        celery_app.conf.task_always_eager = was

    assert "Looking through your recent chats. Suggestions will wait in your inbox." in answer.content.decode()
    assert list(ConsolidationRun.objects.values_list("owner_id", "trigger")) == [(owner.pk, "manual")]
