"""Telegram's webhook bots in the web process: one initialized bot per binding, kept between updates (no getMe
per update), and built again when the binding's token changes."""

from __future__ import annotations

import pytest

from bridges import services
from bridges.models import Binding
from tests.bridges.conftest import TELEGRAM_TOKEN, pair
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)

NEW_TOKEN = "777777:NEW-TOKEN-telegram"


def test_a_webhook_bot_asks_telegram_who_it_is_once_not_for_every_update(telegram_bot, model, alice):
    pair(telegram_bot, alice)
    model.script(reply("One."), reply("Two."), reply("Three."))

    said = [telegram_bot.dm(alice, text).texts for text in ("hi", "and this", "and that")]

    assert said == [["One."], ["Two."], ["Three."]]
    assert len(telegram_bot.server.calls_to("getMe")) == 1


def test_a_new_token_builds_the_webhook_bot_again_with_it(telegram_bot, model, alice):
    pair(telegram_bot, alice)
    model.script(reply("With the old token."), reply("With the new token."))
    telegram_bot.dm(alice, "hi")

    services.binding_update(binding=Binding.objects.get(pk=telegram_bot.binding.pk), credentials={"token": NEW_TOKEN})
    said = telegram_bot.dm(alice, "hi again")

    assert said.texts == ["With the new token."]
    server = telegram_bot.server
    assert [call.token for call in server.calls_to("sendMessage")] == [TELEGRAM_TOKEN, NEW_TOKEN]
    assert [call.token for call in server.calls_to("getMe")] == [TELEGRAM_TOKEN, NEW_TOKEN]
