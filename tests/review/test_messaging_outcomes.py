"""Every save level with every "In messaging apps" choice, in a direct message, a group and a chat the platform
did not describe, through the real Telegram library: the note a paired sender's message makes the model
propose is saved at once to the conversation (with Undo), asked in the chat, locked to the sender who asked,
or refused, as the spec's table says; and the sender who asked answers yes."""

from __future__ import annotations

import itertools

import pytest

from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes.paths import Scope
from tests.bridges.conftest import notes_of, pair
from tests.bridges.drivers import TelegramDriver
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}
LINE = "- diet: vegan, no honey\n"
UNDESCRIBED_ID = -4242


def say(bot: TelegramDriver, person, where: str, text: str):
    """``person`` writes ``text`` in a direct message, a group, or a chat whose type Telegram did not give."""
    if where == "dm":
        return bot.dm(person, text)
    if where == "group":
        return bot.group(person, text)
    update = telegram_fake.group_message(f"@{telegram_fake.BOT_USERNAME} {text}", chat_id=UNDESCRIBED_ID,
                                         chat_type="mystery", user_id=person.number, first_name=person.name,
                                         username=person.name.lower())
    before = len(bot.server.sent)
    assert bot.post(update) == 200
    return bot._said(before)


def chat_id(bot: TelegramDriver, person, where: str) -> str:
    return {"dm": bot.dm_id(person), "group": bot.group_id(), "undescribed": str(UNDESCRIBED_ID)}[where]


def expected(level: str, row: str, where: str) -> str:
    """From the spec: Always confirm and Never cannot be loosened by the row; otherwise the row decides, and
    paired_private saves at once only in a known one-to-one chat."""
    if level == "never" or row == "never":
        return "refused"
    if level == "always":
        return "locked"
    if row == "paired_private" and where == "dm":
        return "saved"
    return "asked"


@pytest.mark.parametrize(("level", "row", "where"),
                         list(itertools.product(("auto", "ask", "always", "never"), ("ask", "paired_private", "never"),
                                                ("dm", "group", "undescribed"))))
def test_a_paired_senders_note_is_saved_asked_locked_or_refused_as_the_spec_says(telegram_bot, owner, model, alice,
                                                                                  bob, level, row, where):
    settings_update(user_id=owner.pk, save_mode=level, messaging_save=row)
    pair(telegram_bot, alice, can_confirm=True)
    pair(telegram_bot, bob, can_confirm=True)
    model.script(tool_calls(("propose_change", VEGAN)), reply("Noted."))
    scope = Scope.channel(telegram_bot.binding.pk, chat_id(telegram_bot, alice, where))

    said = say(telegram_bot, alice, where, "Remember that I am vegan.")

    outcome = expected(level, row, where)
    if outcome == "refused":
        assert notes_of(owner, scope) == "" and not Proposal.objects.exists()
        assert "propose_change" not in {t["function"]["name"] for t in model.requests[0].get("tools") or []}
        return
    if outcome == "saved":
        assert notes_of(owner, scope) == LINE and not Proposal.objects.exists()
        assert "undo within 30 minutes" in said.text
        return
    proposal = Proposal.objects.get()
    assert notes_of(owner, scope) == "" and "Reply yes to save it or no to drop it" in said.text
    assert proposal.locked is (outcome == "locked")
    if where != "dm":  # another paired sender with the permission answers: only under Always confirm it waits
        say(telegram_bot, bob, where, "yes")
        assert Proposal.objects.get().status == ("pending" if outcome == "locked" else "confirmed")
    say(telegram_bot, alice, where, "yes")
    assert Proposal.objects.get().status == "confirmed"
    assert notes_of(owner, scope) == LINE
