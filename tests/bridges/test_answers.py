"""Which typed yes/no answers a question, on each platform through its real library: the one it replies to
(and no other, when that one was answered already or expired), else the most recent open one; only one said
to the bot in a group, only one the sender may answer (anyone else's is told why it does not count while the
question is the bot's last word there, and goes to the model once it has answered since), and never one
decided meanwhile elsewhere. A yes or a no is nothing but one, in any of the languages the app reads
or as a thumb; anything else is a message like any other."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory.models import Proposal
from localai_memory.memory.tasks import sweep_proposals
from localai_memory.notes.services import note_upsert
from tests.bridges.conftest import dm_scope, group_scope, notes_of, pair
from tests.chats.helpers import set_memory
from tests.fakes import slack_server as slack_fake
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

TEA = {"kind": "memory", "topic": "drink", "summary": "green tea"}
BIKE = {"kind": "memory", "topic": "bike", "summary": "a blue bike"}


def test_one_yes_answers_only_the_most_recent_question_and_says_the_other_waits(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA), ("propose_change", BIKE)), reply("Two things to keep."))
    asked = bot.dm(alice, "I drink green tea and ride a blue bike.", expect=3)
    tea, bike = Proposal.objects.get(topic="drink"), Proposal.objects.get(topic="bike")
    assert {pid for _, pid in asked.buttons} == {tea.pk, bike.pk}

    first = bot.dm(alice, "yes")

    assert "Saved: \u201ca blue bike\u201d (bike)." in first.text
    assert "1 more note waits for an answer here" in first.text
    tea.refresh_from_db()
    bike.refresh_from_db()
    assert (bike.status, tea.status) == ("confirmed", "pending")
    assert notes_of(owner, dm_scope(bot, alice)) == "- bike: a blue bike\n"

    second = bot.dm(alice, "no")

    assert "Dropped: \u201cgreen tea\u201d (drink)." in second.text and "waits" not in second.text
    tea.refresh_from_db()
    assert tea.status == "rejected"


def test_a_yes_after_the_question_was_answered_in_the_inbox_is_a_message_for_the_model(bot, api, owner, model,
                                                                                         alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I drink green tea.", expect=2)
    proposal = Proposal.objects.get()
    assert api.post(f"/api/chats/memory/proposals/{proposal.pk}/reject").status_code == 200
    model.script(reply("Yes to what?"))

    late = bot.dm(alice, "yes")

    assert late.texts == ["Yes to what?"]
    assert model.requests[-1]["messages"][-1]["content"] == "yes"
    proposal.refresh_from_db()
    assert proposal.status == "rejected" and notes_of(owner, dm_scope(bot, alice)) == ""


def test_in_a_group_only_a_yes_or_no_said_to_the_bot_answers(telegram_bot, owner, model, alice, bob):
    pair(telegram_bot, alice, can_confirm=True)
    pair(telegram_bot, bob, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    telegram_bot.group(alice, "remember that I drink green tea", expect=2)
    calls = len(model.requests)

    aside = telegram_bot.group_as_typed(bob, "no")  # Bob answers a colleague, not the bot

    assert aside.texts == [] and len(model.requests) == calls
    assert Proposal.objects.get().status == "pending"

    question = telegram_bot.server.sent[-1]
    bot_message = {"message_id": question["message_id"], "date": 0, "text": question["text"],
                   "chat": {"id": telegram_bot.GROUP_ID, "type": "supergroup", "title": "Team"},
                   "from": {"id": telegram_fake.BOT_ID, "is_bot": True, "first_name": "Memory",
                            "username": telegram_fake.BOT_USERNAME}}
    answered = telegram_bot._deliver(telegram_fake.group_message(
        "yes", chat_id=telegram_bot.GROUP_ID, user_id=alice.number, first_name=alice.name,
        reply_to=bot_message), 1)  # a reply to the bot's question is said to the bot

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert notes_of(owner, group_scope(telegram_bot)) == "- drink: green tea\n"


def test_in_a_group_a_yes_from_someone_who_may_not_answer_is_told_why_and_the_note_waits(bot, owner, model, alice,
                                                                                        bob):
    pair(bot, alice, can_confirm=True)
    pair(bot, bob, can_confirm=False)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.group(alice, "remember that I drink green tea", expect=2)
    calls = len(model.requests)

    said = bot.group(bob, "yes")

    assert said.texts == [("You cannot confirm notes in this chat, so the note waits for the owner. The owner can "
                           "allow you to confirm changes from the chat.")]
    assert len(model.requests) == calls  # not a chat message for the model
    assert Proposal.objects.get().status == "pending"
    assert notes_of(owner, group_scope(bot)) == ""


def test_in_a_group_a_yes_from_someone_who_may_not_answer_goes_to_the_model_once_it_answered_since(
        bot, owner, model, alice, bob):
    pair(bot, alice, can_confirm=True)
    pair(bot, bob, can_confirm=False)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.group(alice, "remember that I drink green tea", expect=2)
    model.script(reply("Shall I book the meeting room?"))
    bot.group(bob, "we meet at ten tomorrow")
    model.script(reply("Booked."))

    said = bot.group(bob, "yes")

    assert said.texts == ["Booked."]
    assert model.requests[-1]["messages"][-1]["content"].endswith(": yes")  # Bob's name, as each platform gives it
    assert Proposal.objects.get().status == "pending"

    confirmed = bot.group(alice, "yes")  # one who may answer still confirms the note with a plain yes

    assert "Saved: \u201cgreen tea\u201d (drink)." in confirmed.text
    assert Proposal.objects.get().status == "confirmed"


def test_under_always_confirm_a_typed_yes_from_another_in_the_group_is_told_only_the_asker_confirms(
        bot, owner, model, alice, bob):
    set_memory(owner, save_mode="always")
    pair(bot, alice, can_confirm=True)
    pair(bot, bob, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.group(alice, "remember that the team drinks green tea", expect=2)
    calls = len(model.requests)

    said = bot.group(bob, "no")

    assert said.texts == [("Always confirm is on, so only the person who asked for this note can confirm it in the "
                           "chat; otherwise it waits for the owner.")]
    assert len(model.requests) == calls
    assert Proposal.objects.get().status == "pending"

    answered = bot.group(alice, "yes")  # the one who asked still can

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert Proposal.objects.get().status == "confirmed"


def test_on_slack_a_yes_in_the_thread_of_the_bots_question_answers_it(slack_bot, owner, model, alice, bob):
    pair(slack_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    slack_bot._deliver(slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> remember that I drink green tea",
                                                user=slack_bot.user(alice), channel=slack_bot.GROUP_ID,
                                                channel_type="channel"), 2)
    aside = slack_bot._deliver(slack_fake.message_event(  # a thread of someone else's: not said to the bot
        "yes", user=slack_bot.user(alice), channel=slack_bot.GROUP_ID, channel_type="channel",
        thread_ts="1700000000.000200", parent_user_id=slack_bot.user(bob)), 0)
    assert aside.texts == [] and Proposal.objects.get().status == "pending"

    answered = slack_bot._deliver(slack_fake.message_event(
        "yes", user=slack_bot.user(alice), channel=slack_bot.GROUP_ID, channel_type="channel",
        thread_ts="1700000000.000100", parent_user_id=slack_fake.BOT_USER_ID), 1)

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert notes_of(owner, group_scope(slack_bot)) == "- drink: green tea\n"


def test_on_telegram_a_yes_replying_to_a_questions_message_answers_that_question(telegram_bot, owner, model,
                                                                                  alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA), ("propose_change", BIKE)), reply("Two things to keep."))
    telegram_bot.dm(alice, "I drink green tea and ride a blue bike.", expect=3)
    tea = Proposal.objects.get(topic="drink")
    question = next(item for item in telegram_bot.server.sent
                    if f":{tea.pk}" in str(item.get("reply_markup")))  # the message that asks about the tea
    bot_message = {"message_id": question["message_id"], "date": 0, "text": question["text"],
                   "chat": {"id": alice.number, "type": "private", "first_name": alice.name},
                   "from": {"id": telegram_fake.BOT_ID, "is_bot": True, "first_name": "Memory",
                            "username": telegram_fake.BOT_USERNAME}}

    answered = telegram_bot._deliver(telegram_fake.private_message(
        "yes", user_id=alice.number, first_name=alice.name, reply_to=bot_message), 1)

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text  # not the bike, the most recent
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "confirmed", "bike": "pending"}


def test_on_slack_a_yes_in_a_questions_thread_answers_that_question(slack_bot, owner, model, alice):
    pair(slack_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA), ("propose_change", BIKE)), reply("Two things to keep."))
    slack_bot._deliver(slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> I drink green tea and ride a bike",
                                                user=slack_bot.user(alice), channel=slack_bot.GROUP_ID,
                                                channel_type="channel"), 3)
    tea = Proposal.objects.get(topic="drink")
    question = next(post for post in slack_bot.server.posts if f'"{tea.pk}"' in str(post.get("blocks"))
                    or f"'{tea.pk}'" in str(post.get("blocks")))

    answered = slack_bot._deliver(slack_fake.message_event(
        "yes", user=slack_bot.user(alice), channel=slack_bot.GROUP_ID, channel_type="channel",
        thread_ts=question["ts"], parent_user_id=slack_fake.BOT_USER_ID), 1)

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "confirmed", "bike": "pending"}


def test_on_discord_a_yes_replying_to_a_questions_message_answers_that_question(discord_bot, owner, model, alice):
    pair(discord_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA), ("propose_change", BIKE)), reply("Two things to keep."))
    discord_bot.dm(alice, "I drink green tea and ride a blue bike.", expect=3)
    tea = Proposal.objects.get(topic="drink")
    question = next(m for m in discord_bot.server.messages if f"memory:yes:{tea.pk}" in str(m.get("components")))
    before, interactions = len(discord_bot.server.messages), len(discord_bot.server.interaction_responses)

    discord_bot.server.push_message("yes", author_id=alice.number, username=alice.name.lower(), reply_to=question)
    discord_bot._wait(before, interactions, 1)
    answered = discord_bot._said(before, interactions)

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "confirmed", "bike": "pending"}


def test_a_yes_refused_as_changed_since_does_not_count_its_own_question_as_still_waiting(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="drink", summary="black coffee",
                source="files", actor="you")
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I switched to green tea.", expect=2)
    note_upsert(owner_id=owner.pk, scope=dm_scope(bot, alice), topic="drink", summary="espresso",
                source="files", actor="you")  # the owner changes the note meanwhile

    refused = bot.dm(alice, "yes")

    assert "changed since this was suggested" in refused.text
    assert "waits for an answer" not in refused.text and "wait for an answer" not in refused.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- drink: espresso\n"

    again = bot.dm(alice, "yes")  # seen the note as it is now: a second yes saves over it

    assert "Saved: \u201cgreen tea\u201d (drink)." in again.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- drink: green tea\n"


def _telegram_question(bot, proposal: Proposal) -> dict:
    """The bot's message that asks about ``proposal`` (its first one), as a reply to it quotes it."""
    question = next(item for item in bot.server.sent if f":{proposal.pk}\"" in str(item.get("reply_markup"))
                    or f":{proposal.pk}'" in str(item.get("reply_markup")))
    return {"message_id": question["message_id"], "date": 0, "text": question["text"],
            "chat": {"id": int(question["chat_id"]), "type": "private", "first_name": "Alice"},
            "from": {"id": telegram_fake.BOT_ID, "is_bot": True, "first_name": "Memory",
                     "username": telegram_fake.BOT_USERNAME}}


def _telegram_reply(bot, person, text: str, question: dict):
    return bot._deliver(telegram_fake.private_message(text, user_id=person.number, first_name=person.name,
                                                      reply_to=question), 1)


def test_on_telegram_a_yes_replying_to_a_question_answered_already_says_so_and_saves_no_other(telegram_bot, owner,
                                                                                            model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    telegram_bot.dm(alice, "I drink green tea.")
    tea = Proposal.objects.get(topic="drink")
    tea_question = _telegram_question(telegram_bot, tea)
    telegram_bot.tap(alice, "no", tea.pk)
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    telegram_bot.dm(alice, "I ride a blue bike.")

    late = _telegram_reply(telegram_bot, alice, "yes", tea_question)  # she changed her mind about the tea

    assert "That question was already answered: \u201cgreen tea\u201d (drink) was dropped." in late.text
    assert "1 more note waits for an answer here" in late.text  # the bike
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "rejected", "bike": "pending"}
    assert notes_of(owner, dm_scope(telegram_bot, alice)) == ""


def test_on_telegram_a_no_replying_to_an_expired_question_says_it_expired_and_drops_no_other(telegram_bot, owner,
                                                                                           model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    telegram_bot.dm(alice, "I drink green tea.")
    tea = Proposal.objects.get(topic="drink")
    with time_machine.travel(timezone.now() + timedelta(hours=25)):
        sweep_proposals()  # expired, and announced in the chat
        model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
        telegram_bot.dm(alice, "I ride a blue bike.")

        late = _telegram_reply(telegram_bot, alice, "no", _telegram_question(telegram_bot, tea))

    assert "this one expired" in late.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "expired", "bike": "pending"}


def test_on_telegram_a_yes_replying_to_the_first_of_two_questions_about_one_note_answers_that_note(
        telegram_bot, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    telegram_bot.dm(alice, "I drink green tea.")
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea again."))
    telegram_bot.dm(alice, "Did you get that I drink green tea?")  # the same note, asked a second time
    tea = Proposal.objects.get(topic="drink")
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    telegram_bot.dm(alice, "I ride a blue bike.")

    answered = _telegram_reply(telegram_bot, alice, "yes", _telegram_question(telegram_bot, tea))

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "confirmed", "bike": "pending"}


def test_on_discord_a_yes_replying_to_a_question_answered_already_saves_no_other(discord_bot, owner, model, alice):
    pair(discord_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    discord_bot.dm(alice, "I drink green tea.", expect=2)
    tea = Proposal.objects.get(topic="drink")
    question = next(m for m in discord_bot.server.messages if f"memory:yes:{tea.pk}" in str(m.get("components")))
    discord_bot.tap(alice, "no", tea.pk)
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    discord_bot.dm(alice, "I ride a blue bike.", expect=2)
    before, interactions = len(discord_bot.server.messages), len(discord_bot.server.interaction_responses)

    discord_bot.server.push_message("yes", author_id=alice.number, username=alice.name.lower(), reply_to=question)
    discord_bot._wait(before, interactions, 1)
    late = discord_bot._said(before, interactions)

    assert "That question was already answered: \u201cgreen tea\u201d (drink) was dropped." in late.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "rejected", "bike": "pending"}


def test_on_slack_a_yes_in_the_thread_of_a_question_answered_already_saves_no_other(slack_bot, owner, model, alice):
    pair(slack_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    slack_bot._deliver(slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> I drink green tea",
                                                user=slack_bot.user(alice), channel=slack_bot.GROUP_ID,
                                                channel_type="channel"), 1)
    tea = Proposal.objects.get(topic="drink")
    question = next(post for post in slack_bot.server.posts if f"'{tea.pk}'" in str(post.get("blocks")))
    slack_bot.tap_seen(alice, "no", tea.pk, in_group=True)
    assert Proposal.objects.get(topic="drink").status == "rejected"
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    slack_bot._deliver(slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> I ride a blue bike",
                                                user=slack_bot.user(alice), channel=slack_bot.GROUP_ID,
                                                channel_type="channel"), 1)

    late = slack_bot._deliver(slack_fake.message_event(
        "yes", user=slack_bot.user(alice), channel=slack_bot.GROUP_ID, channel_type="channel",
        thread_ts=question["ts"], parent_user_id=slack_fake.BOT_USER_ID), 1)

    assert "That question was already answered: \u201cgreen tea\u201d (drink) was dropped." in late.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "rejected", "bike": "pending"}


def test_on_slack_a_yes_in_a_thread_answers_the_question_asked_last_in_that_thread(slack_bot, owner, model, alice):
    pair(slack_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    slack_bot._deliver(slack_fake.message_event(f"<@{slack_fake.BOT_USER_ID}> I drink green tea",
                                                user=slack_bot.user(alice), channel=slack_bot.GROUP_ID,
                                                channel_type="channel"), 1)
    tea = Proposal.objects.get(topic="drink")
    thread = next(post for post in slack_bot.server.posts if f"'{tea.pk}'" in str(post.get("blocks")))["ts"]

    def in_thread(text: str):
        return slack_bot._deliver(slack_fake.message_event(
            text, user=slack_bot.user(alice), channel=slack_bot.GROUP_ID, channel_type="channel",
            thread_ts=thread, parent_user_id=slack_fake.BOT_USER_ID), 1)

    in_thread("no")
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    asked = in_thread("I ride a blue bike")  # asked in the same thread
    assert any(pid == Proposal.objects.get(topic="bike").pk for _, pid in asked.buttons)

    answered = in_thread("yes")

    assert "Saved: \u201ca blue bike\u201d (bike)." in answered.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "rejected", "bike": "confirmed"}


YES_ANSWERS = ("Yes, save it", "yes save it", "Yes!", "YES.", "Y", "/yes", "yep", "ok", "Okay 👍", "yes 👍", "👍",
               "👍🏽", "yes please", "sí", "Sì, grazie", "oui", "oui merci", "ja", "Ja, bitte", "sim", "jazeker")
NO_ANSWERS = ("No, drop it", "no thanks", "nope", "nein", "Nein danke", "non", "não", "nee", "👎", "no 👎")


def test_a_yes_or_no_in_other_words_and_languages_or_a_thumb_answers_the_question(telegram_bot, owner, model,
                                                                                   alice):
    pair(telegram_bot, alice, can_confirm=True)
    for number, (said, status) in enumerate([*((word, "confirmed") for word in YES_ANSWERS),
                                             *((word, "rejected") for word in NO_ANSWERS)]):
        model.script(tool_calls(("propose_change", {"kind": "memory", "topic": f"fact{number}",
                                                    "summary": f"fact number {number}"})), reply("Noted."))
        telegram_bot.dm(alice, f"Remember fact number {number}.")
        calls = len(model.requests)

        answered = telegram_bot.dm(alice, said)

        assert Proposal.objects.get(topic=f"fact{number}").status == status, (said, answered.texts)
        assert len(model.requests) == calls, said  # an answer, not a message for the model


@pytest.mark.parametrize("said", ["Yes, save it", "👍"])
def test_the_buttons_own_label_or_a_thumb_typed_answers_the_question(bot, owner, model, alice, said):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I drink green tea.", expect=2)

    answered = bot.dm(alice, said)

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- drink: green tea\n"


@pytest.mark.parametrize("said", ["ok, what about tomorrow?", "yes?", "Yes, and what about tomorrow", "yes no",
                                  "no idea, what do you think"])
def test_a_message_that_only_starts_like_an_answer_goes_to_the_model(telegram_bot, owner, model, alice, said):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    telegram_bot.dm(alice, "I drink green tea.")
    model.script(reply("The model answers."))

    answered = telegram_bot.dm(alice, said)

    assert answered.texts[0] == "The model answers."
    assert model.requests[-1]["messages"][-1]["content"] == said
    assert Proposal.objects.get().status == "pending"


def test_a_yes_with_more_said_goes_to_the_model_and_says_the_note_still_waits(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I drink green tea.", expect=2)
    model.script(reply("Red bikes are nice."))

    answered = bot.dm(alice, "yes but the bike is red", expect=2)

    assert answered.texts == ["Red bikes are nice.",
                              "The note \u201cgreen tea\u201d (drink) still waits: reply yes to save it or no to drop it."]
    assert Proposal.objects.get().status == "pending"


def test_a_question_to_the_model_that_starts_with_ok_names_no_waiting_note(telegram_bot, owner, model, alice):
    pair(telegram_bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    telegram_bot.dm(alice, "I drink green tea.")
    model.script(reply("Tomorrow it rains."))

    answered = telegram_bot.dm(alice, "ok, what about tomorrow?")

    assert answered.texts == ["Tomorrow it rains."]


def test_on_telegram_a_reply_to_a_question_from_someone_who_may_not_answer_is_told_why(telegram_bot, owner, model,
                                                                                      alice, bob):
    pair(telegram_bot, alice, can_confirm=True)
    pair(telegram_bot, bob, can_confirm=False)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    telegram_bot.group(alice, "remember that the team drinks green tea", expect=2)
    question = telegram_bot.server.sent[-1]
    bot_message = {"message_id": question["message_id"], "date": 0, "text": question["text"],
                   "chat": {"id": telegram_bot.GROUP_ID, "type": "supergroup", "title": "Team"},
                   "from": {"id": telegram_fake.BOT_ID, "is_bot": True, "first_name": "Memory",
                            "username": telegram_fake.BOT_USERNAME}}
    calls = len(model.requests)

    answered = telegram_bot._deliver(telegram_fake.group_message(
        "yes", chat_id=telegram_bot.GROUP_ID, user_id=bob.number, first_name=bob.name, reply_to=bot_message), 1)

    assert answered.texts == [("You cannot confirm notes in this chat, so the note waits for the owner. The owner "
                               "can allow you to confirm changes from the chat.")]
    assert len(model.requests) == calls
    assert Proposal.objects.get().status == "pending"


def test_a_plain_yes_after_the_conversation_moved_on_goes_to_the_model_and_the_note_keeps_waiting(
        bot, api, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I drink green tea.", expect=2)
    model.script(reply("Lentil soup is nice. Want a recipe?"))
    bot.dm(alice, "What could I cook tonight?")
    model.script(reply("Here it is: lentils, carrots, cumin."))

    answered = bot.dm(alice, "yes")  # to the recipe the bot offered last, not to the note asked about before

    assert answered.texts == ["Here it is: lentils, carrots, cumin."]
    assert model.requests[-1]["messages"][-1]["content"] == "yes"
    assert Proposal.objects.get().status == "pending"
    assert [item["topic"] for item in api.get("/api/chats/memory/proposals").json()["proposals"]] == ["drink"]
    assert notes_of(owner, dm_scope(bot, alice)) == ""


def test_a_reply_to_the_question_still_answers_it_after_the_conversation_moved_on(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.dm(alice, "I drink green tea.", expect=2)
    model.script(reply("Lentil soup is nice."))
    bot.dm(alice, "What could I cook tonight?")
    calls = len(model.requests)

    answered = bot.reply(alice, "yes", Proposal.objects.get().pk)

    assert "Saved: \u201cgreen tea\u201d (drink)." in answered.text
    assert len(model.requests) == calls
    assert notes_of(owner, dm_scope(bot, alice)) == "- drink: green tea\n"


def test_a_plain_yes_answers_a_question_the_bot_named_as_still_waiting_last(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    bot.dm(alice, "I drink green tea.", expect=2)
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    bot.dm(alice, "I ride a blue bike.", expect=2)
    model.script(reply("Blue is a fine colour."))
    leaning = bot.dm(alice, "yes but it is dark blue", expect=2)
    assert leaning.texts[-1].startswith("The note \u201ca blue bike\u201d (bike) still waits")

    first = bot.dm(alice, "yes")  # the bot's last words named the bike's question

    assert "Saved: \u201ca blue bike\u201d (bike)." in first.text and "1 more note waits" in first.text

    second = bot.dm(alice, "no")  # ... and then the tea's, though a turn came after it was asked

    assert "Dropped: \u201cgreen tea\u201d (drink)." in second.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"drink": "rejected", "bike": "confirmed"}


def test_in_a_group_a_yes_after_the_asker_talked_on_with_the_bot_goes_to_the_model(bot, owner, model, alice, bob):
    pair(bot, alice, can_confirm=True)
    pair(bot, bob, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted."))
    bot.group(alice, "remember that I drink green tea", expect=2)
    model.script(reply("Ten it is."))
    bot.group(bob, "we meet at ten tomorrow")  # to someone else: the bot's last word to Alice is still the question
    model.script(reply("Shall I book the meeting room?"))
    bot.group(alice, "and where?")
    model.script(reply("Booked."))

    said = bot.group(alice, "yes")  # to the room the bot offered her last

    assert said.texts == ["Booked."]
    assert model.requests[-1]["messages"][-1]["content"].endswith(": yes")
    assert Proposal.objects.get().status == "pending"
    assert notes_of(owner, group_scope(bot)) == ""


def test_a_reply_to_a_question_does_not_say_one_answered_in_the_inbox_still_waits(bot, api, owner, model, alice):
    """Answered in the web inbox meanwhile, the tea's question is no longer one to say yes or no to: the
    answer to the bike's names no other note as waiting (a yes to it would go to the model)."""
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    bot.dm(alice, "I drink green tea.", expect=2)
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    bot.dm(alice, "I ride a blue bike.", expect=2)
    tea = Proposal.objects.get(topic="drink")
    assert api.post(f"/api/chats/memory/proposals/{tea.pk}/confirm").status_code == 200

    answered = bot.reply(alice, "yes", Proposal.objects.get(topic="bike").pk)

    assert "Saved: \u201ca blue bike\u201d (bike)." in answered.text
    assert "waits" not in answered.text
    assert notes_of(owner, dm_scope(bot, alice)) == "- drink: green tea\n- bike: a blue bike\n"


def test_a_plain_yes_answers_the_question_the_bot_named_last_not_one_asked_just_before_it(bot, owner, model, alice):
    """A "yes but…" whose turn asks about another note ends with the line naming the earlier question as still
    waiting ("reply yes to save it"): a plain yes then answers that one, as the bot's last words said."""
    pair(bot, alice, can_confirm=True)
    model.script(tool_calls(("propose_change", BIKE)), reply("Noted bike."))
    bot.dm(alice, "I ride a blue bike.", expect=2)
    model.script(tool_calls(("propose_change", TEA)), reply("Noted tea."))
    leaning = bot.dm(alice, "yes but I also drink green tea", expect=3)
    assert leaning.texts[-1].startswith("The note \u201ca blue bike\u201d (bike) still waits")

    answered = bot.dm(alice, "yes")

    assert "Saved: \u201ca blue bike\u201d (bike)." in answered.text and "1 more note waits" in answered.text
    assert {p.topic: p.status for p in Proposal.objects.all()} == {"bike": "confirmed", "drink": "pending"}
