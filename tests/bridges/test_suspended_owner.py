"""An account an administrator suspends (unticks "Active") has its bots fall silent: runbridges stops them, a
webhook update is taken and ignored, a message that still reaches a running bot is neither answered nor
saved, and an expired question is not announced. Ticking "Active" again brings them back."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.utils import timezone

from bridges.models import Conversation, Delivery, Notice
from localai_memory.memory.models import Proposal
from localai_memory.memory.tasks import sweep_proposals
from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def suspend(owner, *, active: bool = False) -> None:
    """What unticking (or ticking) "Active" on the admin's user page does."""
    get_user_model().objects.filter(pk=owner.pk).update(is_active=active)


def _posted(bot) -> list[str]:
    return bot.server.sent_texts() if bot.platform == "telegram" else bot.server.posted_texts()


@pytest.mark.parametrize("bot_fixture", ["telegram_bot", "slack_bot"])
def test_a_suspended_owners_bot_neither_answers_nor_saves_a_note(request, bot_fixture, owner, model, alice):
    """Telegram's webhook takes the update (200, so Telegram does not send it again) and drops it; a Slack
    event reaches the bot core, which refuses it: no model call, no note, no reply, nothing recorded."""
    bot = request.getfixturevalue(bot_fixture)
    pair(bot, alice, can_confirm=True)
    suspend(owner)

    said = bot.dm(alice, "/remember I live in Rome")  # the driver asserts the platform got a 200

    assert said.texts == [] and _posted(bot) == []
    assert model.requests == []
    assert notes_of(owner, dm_scope(bot, alice)) == ""
    assert not Conversation.objects.exists() and not Delivery.objects.exists()


def test_a_suspended_owners_telegram_webhook_still_checks_its_secret(telegram_bot, owner, alice):
    suspend(owner)

    assert telegram_bot.post(telegram_fake.private_message("hi", user_id=alice.number), secret="wrong-secret") == 403


def test_a_bot_answers_again_once_its_owner_is_active_again(telegram_bot, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    suspend(owner)
    assert telegram_bot.dm(alice, "hello?").texts == []

    suspend(owner, active=True)
    model.script(reply("Hello again."))

    assert telegram_bot.dm(alice, "hello?").texts == ["Hello again."]


def test_a_question_of_a_suspended_owners_bot_expires_without_an_announcement(telegram_bot, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("Noted."))
    telegram_bot.dm(alice, "Remember I am vegan")
    sent = len(telegram_bot.server.sent)
    suspend(owner)

    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        sweep_proposals()

    assert telegram_bot.server.sent[sent:] == []
    assert Proposal.objects.get().status == "expired"
    assert not Notice.objects.filter(closed_at__isnull=True, kind="question").exists()
