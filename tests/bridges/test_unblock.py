"""The owner takes back a denied pairing, or gives a bot a new token, on the Bridges page: the bot is the same
(its senders stay paired, its conversations keep their notes), on every platform's real library."""

from __future__ import annotations

import pytest
from django.test import Client

from bridges import services
from bridges.models import Binding, Sender
from tests.bridges.conftest import TELEGRAM_TOKEN, pair, sender_key
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)

NEW_TOKEN = "777777:NEW-TOKEN-telegram"


def _page(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_an_unblocked_sender_gets_a_new_pairing_code_when_they_write_again(bot, owner, carol):
    first = bot.dm(carol, "hello?").pairing_code()
    sender = Sender.objects.get(binding=bot.binding, external_id=sender_key(bot, carol))
    services.pairing_deny(request=sender.pairing_requests.get(code=first))
    assert bot.dm(carol, "hello again?", expect=0).texts == []  # blocked: ignored

    assert _page(owner).post(f"/bridges/senders/{sender.pk}/unblock/").status_code == 302
    second = bot.dm(carol, "and now?").pairing_code()

    assert second != first
    assert sender.pairing_requests.get(code=second).status == "pending"


def test_a_new_token_entered_on_the_page_keeps_the_pairing_and_the_conversations_notes(telegram_bot, owner, model,
                                                                                     alice):
    pair(telegram_bot, alice, can_confirm=True)
    telegram_bot.remember(alice, "I live in Rome")

    edited = _page(owner).post(f"/bridges/{telegram_bot.binding.pk}/edit/",
                               {"name": "Family bot", "mode": "webhook", "agent": "", "token": NEW_TOKEN})
    model.script(reply("Hello again, Alice."))
    said = telegram_bot.dm(alice, "hello")
    notes = telegram_bot.memory(alice)

    assert edited.status_code == 302
    assert said.texts == ["Hello again, Alice."]  # no pairing code: still paired
    assert "Rome" in notes.text
    sends = telegram_bot.server.calls_to("sendMessage")
    assert sends[0].token == TELEGRAM_TOKEN and {call.token for call in sends[-2:]} == {NEW_TOKEN}
    assert Binding.objects.filter(owner=owner).count() == 1
