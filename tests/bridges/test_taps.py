"""Taps on the Yes/No buttons, on each platform through its real library: who is told what, and where. A
blocked sender's tap says nothing; an unpaired sender's is answered to them alone; a paired sender who cannot
confirm is told the real reason; a question that was dropped says why."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from bridges import core, services
from bridges.models import SenderStatus
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import memory_forget_all
from localai_memory.notes.services import lock_owner
from tests.bridges.conftest import group_scope, notes_of, pair, sender_key
from tests.bridges.drivers import Driver, Person
from tests.chats.helpers import set_memory
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

TEA = {"kind": "memory", "topic": "drink", "summary": "green tea"}


def asked_in_group(bot: Driver, model, person: Person) -> Proposal:
    """``person`` tells the bot in the group, and the bot asks there whether to save the tea."""
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.group(person, "remember that the team drinks green tea", expect=2)
    return Proposal.objects.get()


def block(bot: Driver, person: Person) -> None:
    """``person`` asked to pair and the owner denied it: they are blocked."""
    sender = services.sender_seen(binding_id=bot.binding.pk, external_id=sender_key(bot, person),
                                  display=person.name)
    offer = services.pairing_offer(sender=sender)
    request = sender.pairing_requests.get(code=offer.code)
    assert services.pairing_deny(request=request).status == SenderStatus.BLOCKED


def test_a_blocked_senders_taps_in_a_group_are_ignored_without_a_word(bot, owner, model, alice, carol):
    pair(bot, alice, can_confirm=True)
    proposal = asked_in_group(bot, model, alice)
    block(bot, carol)

    taps = [bot.tap_seen(carol, answer, proposal.pk, in_group=True) for answer in ("yes", "no", "yes")]

    assert all(tapped.public == [] and tapped.private == [] and tapped.card == [] for tapped in taps), taps
    proposal.refresh_from_db()
    assert proposal.status == "pending" and notes_of(owner, group_scope(bot)) == ""


def test_an_unpaired_senders_tap_in_a_group_is_answered_to_them_alone(bot, owner, model, alice, carol):
    assert core.UNPAIRED_TAP_TEXT.startswith("Only people paired with this bot can answer its questions")
    pair(bot, alice, can_confirm=True)
    proposal = asked_in_group(bot, model, alice)

    taps = [bot.tap_seen(carol, "yes", proposal.pk, in_group=True) for _ in range(3)]

    for tapped in taps:
        assert tapped.public == [] and tapped.card == [], tapped  # the group sees nothing, however often
        assert tapped.private == [core.UNPAIRED_TAP_TEXT]
    proposal.refresh_from_db()
    assert proposal.status == "pending" and notes_of(owner, group_scope(bot)) == ""


@pytest.mark.parametrize(("settings_", "says"), [
    ({"enabled": False}, "Memory is off in your settings."),
    ({"messaging_save": "never"}, "Saving notes from messaging apps is off in your settings (In messaging apps)."),
    ({"save_mode": "never"}, "Saving notes is off in your settings (Never)."),
])
def test_a_tap_that_cannot_count_now_says_which_setting_stops_it(bot, owner, model, alice, settings_, says):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    asked = bot.dm(alice, "I drink green tea.", expect=2)
    set_memory(owner, **settings_)

    tapped = bot.tap(alice, "yes", asked.buttons[0][1])

    assert "This note cannot be confirmed in the chat now, so it waits for the owner. " + says in tapped.text
    assert "The owner can allow you" not in tapped.text
    assert Proposal.objects.get().status == "pending"


def test_under_always_confirm_only_the_one_who_asked_can_confirm_and_others_are_told_so(bot, owner, model, alice,
                                                                                      bob):
    set_memory(owner, save_mode="always")
    pair(bot, alice, can_confirm=True)
    pair(bot, bob, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))

    asked = bot.group(alice, "remember that the team drinks green tea", expect=2)

    assert "Always confirm is on, so only the person who asked can confirm it here." in asked.text
    proposal = Proposal.objects.get()

    tapped = bot.tap_seen(bob, "yes", proposal.pk, in_group=True)

    said = "\n".join(tapped.public + tapped.card)
    assert ("Always confirm is on, so only the person who asked for this note can confirm it in the chat; "
            "otherwise it waits for the owner.") in said
    assert "The owner can allow you" not in said
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_a_question_in_a_direct_chat_under_always_confirm_does_not_say_who_may_answer(telegram_bot, owner, model,
                                                                                    alice):
    set_memory(owner, save_mode="always")
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))

    asked = telegram_bot.dm(alice, "I drink green tea.")

    assert "Reply yes to save it or no to drop it." in asked.text and "only the person" not in asked.text


def test_a_tap_on_a_question_dropped_by_forget_everything_says_why_not_that_it_expired(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    proposal = asked_in_group(bot, model, alice)
    memory_forget_all(user_id=owner.pk)

    tapped = bot.tap_seen(alice, "yes", proposal.pk, in_group=True)

    said = "\n".join([*tapped.public, *tapped.private, *tapped.card])
    assert "Everything in memory was forgotten after this was suggested, so it was dropped." in said
    assert "Expired" not in said
    # The outcome shown on the question itself (Slack) and in the answer to the tap (Telegram).
    label = "Dropped: everything in memory was forgotten after it was suggested."
    if bot.platform == "slack":
        assert any(text.endswith(label) for text in tapped.card), tapped
    if bot.platform == "telegram":
        assert tapped.private == [label]


def test_on_telegram_a_slow_tap_stops_spinning_and_its_outcome_follows_as_a_message(telegram_bot, owner, model,
                                                                                   alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    proposal_id = telegram_bot.dm(alice, "I drink green tea.").buttons[0][1]
    server = telegram_bot.server
    answered, sent = len(server.calls_to("answerCallbackQuery")), len(server.sent)
    tapping = threading.Thread(target=telegram_bot.tap, args=(alice, "yes", proposal_id))

    with transaction.atomic():
        lock_owner(owner.pk)  # another write of the owner's notes holds them: the confirm waits for it
        tapping.start()
        server.wait_for(lambda: len(server.calls_to("answerCallbackQuery")) > answered, timeout=15,
                        message="the tap was not answered while its outcome was not known")
        [answer] = server.calls_to("answerCallbackQuery")[answered:]
        assert not answer.params.get("text")  # the spinner stops; nothing is claimed yet
        assert len(server.sent) == sent
    tapping.join(timeout=15)

    assert not tapping.is_alive()
    assert "Saved: \u201cgreen tea\u201d (drink)." in server.sent_texts()[-1]
    assert Proposal.objects.get().status == "confirmed"


def test_a_tap_on_a_note_asked_twice_saves_it_and_says_so_once(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I drink green tea.", expect=2)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted again."))
    bot.dm(alice, "Did you get that I drink green tea?", expect=2)  # the same note, asked a second time

    tapped = bot.tap(alice, "yes", Proposal.objects.get().pk)

    assert tapped.text.count("Saved: \u201cgreen tea\u201d (drink).") == 1, tapped.texts
    assert "already answered" not in tapped.text
    assert Proposal.objects.get().status == "confirmed"
