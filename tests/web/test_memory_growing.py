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
    page = signed_in(owner).get(TAB).content.decode()
    assert "Last look (synthesize now," in page and "looked through 0 chats; nothing new to suggest." in page
    assert "Last look" not in signed_in(outsider).get(TAB).content.decode()


def test_synthesize_now_with_memory_off_says_why_and_runs_nothing(owner):
    from localai_memory.memory.services import settings_update

    settings_update(user_id=owner.pk, enabled=False)
    answer = signed_in(owner).post("/settings/memory/synthesize/", follow=True).content.decode()
    assert "Memory is off, so there is nothing to look through. Turn it on first." in answer
    assert not ConsolidationRun.objects.exists()


def test_the_tab_says_when_the_last_look_failed_and_why(owner, settings):
    from localai_memory.chats.models import Chat, Message
    from localai_memory.growth.consolidation import consolidate_user

    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    chat = Chat.objects.create(owner=owner)
    Message.objects.create(chat=chat, role="user", content="I moved to Lisbon and I only eat fish.",
                           typed_by_user=True)
    assert consolidate_user(owner_id=owner.pk, trigger="schedule").status == "failed"
    page = signed_in(owner).get(TAB).content.decode()
    assert "did not finish: the model server did not answer." in page


def test_a_look_cut_off_on_the_way_is_not_shown_as_running_forever(owner):
    from datetime import timedelta

    import time_machine
    from django.utils import timezone

    ConsolidationRun.objects.create(owner=owner, trigger="schedule", status="done", started_at=timezone.now())
    assert "looking through your chats now…" in signed_in(owner).get(TAB).content.decode()
    with time_machine.travel(timezone.now() + timedelta(minutes=11)):
        page = signed_in(owner).get(TAB).content.decode()
    assert "did not finish: it stopped on the way (the next look starts over)." in page
