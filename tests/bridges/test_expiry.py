"""An expired proposal is announced in the chat that asked, by the memory sweep's listener."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from bridges.models import Notice
from localai_memory.memory.models import Proposal
from localai_memory.memory.tasks import sweep_proposals
from tests.bridges.conftest import pair
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def _posted(bot) -> list[str]:
    server = bot.server
    if bot.platform == "telegram":
        return server.sent_texts()
    if bot.platform == "slack":
        return server.posted_texts()
    return server.posted_contents()


def test_the_sweep_announces_an_expired_proposal_in_the_chat_that_asked(bot, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("Noted."))
    bot.dm(alice, "Remember I am vegan", expect=2)

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        sweep_proposals()
        sweep_proposals()  # announced once

    announcements = [t for t in _posted(bot) if "nobody answered within 24 hours" in t]
    assert len(announcements) == 1 and "vegan" in announcements[0]
    assert Proposal.objects.get().status == "expired" and Proposal.objects.get().notified
    assert not Notice.objects.filter(closed_at__isnull=True, kind="question").exists()


def test_an_announcement_that_cannot_be_sent_is_tried_again_at_the_next_sweep(telegram_bot, model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("Noted."))
    telegram_bot.dm(alice, "Remember I am vegan")
    telegram_bot.server.fail_next(400, method="sendMessage", description="Bad Request: chat not found")

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        sweep_proposals()
        first = list(telegram_bot.server.sent_texts())
        sweep_proposals()

    assert not any("nobody answered" in t for t in first)
    assert any("nobody answered" in t for t in telegram_bot.server.sent_texts())


def _ask_to_forget(bot, owner, model, alice) -> None:
    from localai_memory.notes.services import note_upsert
    from tests.bridges.conftest import dm_scope

    pair(bot, alice, can_confirm=True)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="diet", summary="vegan", source="files")
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "delete": True})),
                 reply("I can drop that."))
    bot.dm(alice, "Forget what I eat", expect=2)


def test_an_expired_note_to_forget_is_announced_as_not_forgotten(telegram_bot, owner, model, alice):
    _ask_to_forget(telegram_bot, owner, model, alice)

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        sweep_proposals()

    assert any("The note \u201cdiet\u201d was not forgotten: nobody answered within 24 hours" in t
               for t in telegram_bot.server.sent_texts())


def test_a_late_yes_to_a_note_to_forget_says_it_was_not_forgotten(telegram_bot, owner, model, alice):
    _ask_to_forget(telegram_bot, owner, model, alice)

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        late = telegram_bot.dm(alice, "yes")

    assert "That note was not forgotten: a proposal waits 24 hours for an answer" in late.text
