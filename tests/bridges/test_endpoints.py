"""The platforms' endpoints check the platform's proof before anything happens; Slack is answered at once and
handled in the background; a yes in the chat racing a click in the inbox saves once."""

from __future__ import annotations

import pytest

from bridges.models import Delivery
from localai_memory.memory.models import Proposal
from localai_memory.notes.models import ChangeSet
from tests.bridges.conftest import SLACK_SECRET, dm_scope, notes_of, pair
from tests.fakes import slack_server as slack_fake
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_telegram_update_with_a_wrong_secret_is_refused_and_nothing_happens(telegram_bot, model, alice):
    pair(telegram_bot, alice)
    update = telegram_fake.private_message("hi", user_id=alice.number)

    wrong = telegram_bot.post(update, secret="not-the-secret-at-all")
    missing = telegram_bot.post(update, secret="")

    assert (wrong, missing) == (403, 403)
    assert model.requests == [] and telegram_bot.server.sent == [] and not Delivery.objects.exists()


def test_a_telegram_webhook_refuses_what_is_not_an_update(telegram_bot):
    response = telegram_bot.web.post(f"/bridges/telegram/{telegram_bot.binding.pk}/webhook", data="nonsense",
                                     content_type="application/json",
                                     headers={"X-Telegram-Bot-Api-Secret-Token": telegram_bot.secret})

    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


def test_a_disabled_bindings_webhook_is_not_found(telegram_bot, alice):
    from bridges.services import binding_set_enabled

    binding_set_enabled(binding=telegram_bot.binding, enabled=False)

    assert telegram_bot.post(telegram_fake.private_message("hi", user_id=alice.number)) == 404


def test_a_slack_event_with_a_wrong_signature_is_refused_and_nothing_happens(slack_bot, model, alice):
    pair(slack_bot, alice)
    forged = slack_fake.event_request(slack_fake.message_im("hi", user="U5550001", channel="D5550001"),
                                      signing_secret="not-the-secret")

    assert slack_bot.post(forged) == 401
    assert model.requests == [] and slack_bot.server.posts == []


def test_slacks_url_verification_is_answered(slack_bot):
    signed = slack_fake.url_verification_request("challenge-42", signing_secret=SLACK_SECRET)

    response = slack_bot.web.post(f"/bridges/slack/{slack_bot.binding.pk}/events", data=signed.body,
                                  content_type=signed.content_type, headers=signed.django_headers())

    assert response.status_code == 200 and "challenge-42" in response.content.decode()


def test_slack_is_acknowledged_at_once_and_the_answer_follows(slack_bot, settings, model, alice):
    settings.BRIDGES_SLACK_PROCESS_BEFORE_RESPONSE = False  # the production default: ack within 3 s
    pair(slack_bot, alice)
    model.script(reply("Hello from the thread pool."))
    event = slack_fake.message_im("hi", user="U5550001", channel="D5550001")

    status = slack_bot.post(slack_fake.event_request(event, signing_secret=SLACK_SECRET))
    slack_bot.server.wait_for_posts(1, timeout=10)

    assert status == 200
    assert slack_bot.server.posted_texts("D5550001") == ["Hello from the thread pool."]


def test_a_yes_in_the_chat_after_a_confirm_in_the_inbox_saves_once(telegram_bot, api, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("Noted."))
    telegram_bot.dm(alice, "Remember I am vegan")
    proposal = Proposal.objects.get()

    confirmed = api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm")
    model.script(reply("Yes to what?"))
    late = telegram_bot.dm(alice, "yes")

    assert confirmed.status_code == 200
    assert late.texts == ["Yes to what?"]  # nothing waits any more: an ordinary message, not swallowed
    assert notes_of(owner, dm_scope(telegram_bot, alice)) == "- diet: vegan\n"
    assert ChangeSet.objects.filter(proposal_id=proposal.pk).count() == 1


def test_messages_in_a_group_that_are_not_for_the_bot_are_ignored(slack_bot, model, alice):
    pair(slack_bot, alice)
    event = slack_fake.message_channel("lunch at noon?", user="U5550001", channel="C0GENERAL")

    assert slack_bot.post(slack_fake.event_request(event, signing_secret=SLACK_SECRET)) == 200

    assert model.requests == [] and slack_bot.server.posts == []


def test_an_unknown_sender_in_a_group_gets_a_code_only_when_they_address_the_bot(telegram_bot, model, carol):
    chatter = telegram_fake.group_message("lunch at noon?", chat_id=-100777, user_id=carol.number)
    addressed = telegram_fake.group_message("@memory_test_bot hello", chat_id=-100777, user_id=carol.number)

    telegram_bot.post(chatter)
    assert telegram_bot.server.sent == []
    telegram_bot.post(addressed)

    assert "pairing code" in telegram_bot.server.sent_texts(-100777)[0]
    assert model.requests == []


def test_a_telegram_button_from_someone_else_does_not_count(telegram_bot, owner, model, alice, bob):
    pair(telegram_bot, alice, can_confirm=True)
    pair(telegram_bot, bob, can_confirm=True)  # paired, and allowed to confirm in his own chat
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("Noted."))
    telegram_bot.dm(alice, "Remember I am vegan")
    proposal = Proposal.objects.get()

    tapped = telegram_bot.tap(bob, "yes", proposal.pk)  # a forged tap from Bob's own chat

    assert "does not belong to this chat" in tapped.text
    assert notes_of(owner, dm_scope(telegram_bot, alice)) == ""
    assert Proposal.objects.get().status == "pending"
