"""Forget everything (and the terminal's clear) is a clean slate for consolidation too: what was said in a chat
before it is never suggested afterwards, not by the pass planned after the turn, nor by a pass that was
waiting for the model when the owner pressed it. Deleting an agent, a bot or the chat itself while a pass
reads it keeps its suggestions out of the inbox just the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from bridges.models import Binding
from localai_memory.agents.models import Agent
from localai_memory.agents.services import agent_delete
from localai_memory.chats.models import Chat, Message
from localai_memory.chats.services import chat_delete
from localai_memory.growth.consolidation import EPISODES_TOPIC, consolidate_user
from localai_memory.growth.models import ChatWatermark
from localai_memory.growth.services import memory_clear
from localai_memory.memory.models import MemorySettings, Proposal
from localai_memory.memory.services import memory_forget_all, settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import TrashEntry
from localai_memory.notes.paths import Scope
from tests.fakes.openai_server import reply
from tests.support.meanwhile import meanwhile

from .conftest import add_messages, fact, facts_reply

LISBON = "I moved to Lisbon last month and I am vegan."
LISBON_FACTS = facts_reply(fact("home", "lives in Lisbon"), fact("diet", "vegan"), summary="Moving to Lisbon")


def waiting(owner) -> list[Proposal]:
    return list(Proposal.objects.filter(owner=owner, status=Proposal.Status.PENDING).order_by("id"))


def index_of(owner, scope: Scope | None = None) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=scope or Scope.user())


@pytest.mark.django_db
def test_the_pass_after_the_turn_suggests_nothing_said_before_forget_everything(owner, model, make_chat):
    make_chat(owner, LISBON, ago=timedelta(minutes=2))
    memory_forget_all(user_id=owner.pk)
    model.script(reply(LISBON_FACTS))

    result = consolidate_user(owner_id=owner.pk, trigger="after_turn")

    assert waiting(owner) == [] and result.proposals == []
    assert not model.requests  # nothing from before the forget is even read


@pytest.mark.django_db
def test_a_finished_chat_from_before_forget_everything_gets_no_recent_chats_line(owner, model, make_chat):
    make_chat(owner, LISBON, ago=timedelta(hours=1))
    memory_forget_all(user_id=owner.pk)
    model.script(reply(LISBON_FACTS))

    consolidate_user(owner_id=owner.pk)

    assert not Proposal.objects.filter(owner=owner, topic=EPISODES_TOPIC).exists()
    assert index_of(owner) == ""


@pytest.mark.django_db
def test_what_is_typed_after_forget_everything_is_read_as_before(owner, model, make_chat):
    chat = make_chat(owner, LISBON, ago=timedelta(minutes=2))
    memory_forget_all(user_id=owner.pk)
    add_messages(chat, "I started learning Portuguese this week.")
    model.script(reply(facts_reply(fact("languages", "learning Portuguese"))))

    consolidate_user(owner_id=owner.pk)

    assert [p.summary for p in waiting(owner)] == ["learning Portuguese"]
    shown = model.last_messages[-1]["content"]
    assert "Portuguese" in shown and "Lisbon" not in shown


@pytest.mark.django_db
def test_after_the_terminals_clear_old_chats_are_not_suggested_either(owner, model, make_chat):
    make_chat(owner, LISBON, ago=timedelta(hours=1))
    memory_clear(owner_id=owner.pk)
    model.script(reply(LISBON_FACTS))

    consolidate_user(owner_id=owner.pk)

    assert waiting(owner) == [] and not model.requests


@pytest.mark.django_db(transaction=True)  # the owner acts on another connection while the pass waits
def test_forget_everything_while_the_pass_waits_for_the_model_leaves_the_inbox_empty(owner, model, make_chat):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source="files", actor="you")
    make_chat(owner, LISBON, ago=timedelta(hours=1))
    model.script(meanwhile(lambda: memory_forget_all(user_id=owner.pk), LISBON_FACTS))

    result = consolidate_user(owner_id=owner.pk)

    assert model.requests and waiting(owner) == [] and result.proposals == []
    assert index_of(owner) == ""
    # the Forget-everything entry of the Trash brings back what was forgotten, and nothing the pass read
    forgot = TrashEntry.objects.get(owner=owner, kind=TrashEntry.Kind.FORGET)
    notes_services.trash_restore(owner_id=owner.pk, entry_id=forgot.pk)
    assert index_of(owner) == "- diet: vegetarian\n" and waiting(owner) == []
    # and the next pass reads nothing from before the forget
    model.script(reply(LISBON_FACTS))
    assert consolidate_user(owner_id=owner.pk).model_calls == 0 and waiting(owner) == []


@pytest.mark.django_db(transaction=True)
def test_a_chat_the_pass_read_just_before_forget_everything_gets_no_recent_chats_line(owner, model, make_chat):
    make_chat(owner, "We planned the trip to Porto in detail, trains and hotels.", ago=timedelta(hours=2))
    make_chat(owner, LISBON, ago=timedelta(hours=1))  # newer: read first
    model.script(reply(LISBON_FACTS),
                 meanwhile(lambda: memory_forget_all(user_id=owner.pk), facts_reply(summary="Planning a trip")))

    result = consolidate_user(owner_id=owner.pk)

    assert result.model_calls == 2 and waiting(owner) == [] and result.proposals == []
    assert not Proposal.objects.filter(owner=owner, topic=EPISODES_TOPIC).exists()


@pytest.mark.django_db(transaction=True)  # the owner forgets on another connection while the model answers
def test_what_a_turn_still_answering_at_forget_everything_was_told_is_not_suggested_afterwards(owner, model):
    """The turn's message is stored with its reply, after the forget; it was said before it."""
    from localai_memory.chats.services import chat_create, turn_run

    chat = chat_create(owner_id=owner.pk, title="Moving")
    model.script(meanwhile(lambda: memory_forget_all(user_id=owner.pk), "Congratulations on the move!"))
    turn_run(chat=chat, content=LISBON)
    assert Message.objects.filter(chat=chat).count() == 2  # answered and kept, as any turn
    asked = len(model.requests)

    # two hours on, the chat is finished: it would get a recent-chats line too
    result = consolidate_user(owner_id=owner.pk, now=timezone.now() + timedelta(hours=2))

    assert waiting(owner) == [] and result.proposals == [] and len(model.requests) == asked
    # what is typed in the chat after the forget is read as usual
    add_messages(chat, "I started learning Portuguese this week.")
    model.script(reply(facts_reply(fact("languages", "learning Portuguese"))))
    consolidate_user(owner_id=owner.pk)
    assert [p.summary for p in waiting(owner)] == ["learning Portuguese"]
    assert "Lisbon" not in model.last_messages[-1]["content"]


@pytest.mark.django_db(transaction=True)  # the owner forgets on another connection while the model answers
def test_a_message_said_before_forget_everything_on_a_host_whose_clock_runs_ahead_is_not_suggested(owner, model):
    """The chat's host runs five minutes ahead of the database, whose clock records the forget: the message
    is still seen to have come before it."""
    from localai_memory.chats.services import chat_create, turn_run

    chat = chat_create(owner_id=owner.pk, title="Moving")
    model.script(meanwhile(lambda: memory_forget_all(user_id=owner.pk), "Congratulations on the move!"))
    with time_machine.travel(timezone.now() + timedelta(minutes=5)):
        turn_run(chat=chat, content=LISBON)
    model.script(reply(LISBON_FACTS))

    result = consolidate_user(owner_id=owner.pk)

    assert waiting(owner) == [] and result.proposals == [] and result.model_calls == 0


@pytest.mark.django_db
def test_a_message_said_after_forget_everything_on_a_host_whose_clock_runs_behind_is_read(owner, model):
    """The chat's host runs five minutes behind the database: what is said after the forget is read as usual."""
    from localai_memory.chats.services import chat_create, turn_run

    chat = chat_create(owner_id=owner.pk, title="Learning")
    memory_forget_all(user_id=owner.pk)
    # a second ago: a turn's arrival on the database's clock is never later than it was, and may be earlier by
    # the time its first read took, so a message within milliseconds of a forget counts as before it
    MemorySettings.objects.filter(user=owner).update(forgot_at=F("forgot_at") - timedelta(seconds=1))
    model.script(reply("Boa sorte!"))
    with time_machine.travel(timezone.now() - timedelta(minutes=5)):
        turn_run(chat=chat, content="I started learning Portuguese this week.")
    model.script(reply(facts_reply(fact("languages", "learning Portuguese"))))

    consolidate_user(owner_id=owner.pk)

    assert [p.summary for p in waiting(owner)] == ["learning Portuguese"]


@pytest.mark.django_db(transaction=True)
def test_the_terminals_clear_while_the_pass_waits_for_the_model_leaves_the_inbox_empty(owner, model, make_chat):
    make_chat(owner, LISBON, ago=timedelta(hours=1))
    model.script(meanwhile(lambda: memory_clear(owner_id=owner.pk), LISBON_FACTS))

    consolidate_user(owner_id=owner.pk)

    assert waiting(owner) == [] and index_of(owner) == ""


@pytest.mark.django_db(transaction=True)
def test_deleting_the_agent_while_the_pass_reads_its_chat_suggests_nothing_for_its_notes(owner, model, make_chat):
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], grants=["memory.write"], memory="own")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="servings",
                               summary="cooks for two", source="files", actor="you")
    make_chat(owner, "For recipes: I cook for four people every evening.", agent=agent)
    model.script(meanwhile(lambda: agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="keep"),
                           facts_reply(fact("servings", "cooks for four", action="update"))))

    consolidate_user(owner_id=owner.pk)

    assert waiting(owner) == []
    assert index_of(owner, Scope.agent(agent.pk)) == "- servings: cooks for two\n"  # the kept notes as they were


@pytest.mark.django_db(transaction=True)
def test_a_chat_with_the_agent_read_just_before_it_was_deleted_gets_no_line_in_its_notes(owner, model, make_chat):
    agent = Agent.objects.create(owner=owner, name="Chef", tools=["memory"], grants=["memory.write"], memory="own")
    make_chat(owner, "Tonight we cooked a risotto with mushrooms and parmesan.", agent=agent, ago=timedelta(hours=1))
    make_chat(owner, "Big news: I moved to Lisbon last month.", ago=timedelta(hours=2))  # older: read second
    model.script(reply(facts_reply(summary="Cooking a mushroom risotto")),
                 meanwhile(lambda: agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="keep"),
                           facts_reply(fact("home", "lives in Lisbon"))))

    consolidate_user(owner_id=owner.pk)

    assert [(p.scope_kind, p.topic) for p in waiting(owner)] == [("user", "home")]


@pytest.mark.django_db(transaction=True)
def test_deleting_the_bot_while_the_pass_reads_its_conversation_suggests_nothing_for_it(owner, model, make_chat):
    from bridges.services import binding_delete

    bot = Binding.objects.create(owner=owner, platform="telegram", name="Home bot", mode="polling")
    make_chat(owner, LISBON, origin="messaging", binding_id=bot.pk, conversation_key=f"{bot.pk}-abcdef123456")
    model.script(meanwhile(lambda: binding_delete(binding=Binding.objects.get(pk=bot.pk)), LISBON_FACTS))

    consolidate_user(owner_id=owner.pk)

    assert waiting(owner) == []


@pytest.mark.django_db(transaction=True)
def test_deleting_the_chat_while_the_pass_reads_it_suggests_nothing_from_it(owner, model, make_chat):
    chat = make_chat(owner, LISBON, ago=timedelta(hours=1))  # finished: it would get a recent-chats line too
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=chat.pk), LISBON_FACTS))

    result = consolidate_user(owner_id=owner.pk)

    assert model.requests and result.status == "done"
    assert waiting(owner) == [] and result.proposals == [] and result.summaries == 0
    assert not Chat.objects.filter(pk=chat.pk).exists() and not ChatWatermark.objects.filter(owner=owner).exists()


@pytest.mark.django_db(transaction=True)
def test_a_chat_the_pass_read_just_before_it_was_deleted_gets_no_recent_chats_line(owner, model, make_chat):
    gone = make_chat(owner, "We planned the trip to Porto in detail, trains and hotels.", ago=timedelta(hours=1))
    make_chat(owner, "Big news: I moved to Lisbon last month.", ago=timedelta(hours=2))  # older: read second
    model.script(reply(facts_reply(summary="Planning a trip to Porto")),
                 meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=gone.pk),
                           facts_reply(fact("home", "lives in Lisbon"), summary="Moving to Lisbon")))

    consolidate_user(owner_id=owner.pk)

    [home, episodes] = sorted(waiting(owner), key=lambda p: p.topic)
    assert home.topic == "home" and episodes.topic == EPISODES_TOPIC
    assert "Moving to Lisbon" in episodes.details and "Porto" not in episodes.details


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("read_before", [False, True], ids=["new", "read-before"])
@pytest.mark.parametrize("quiet", ["private", "saving_off"])
def test_a_chat_deleted_while_the_pass_reads_another_one_is_passed_over_without_an_error(
        owner, model, make_chat, quiet, read_before):
    """A private chat (or one whose agent saves nothing) is counted as read without asking the model; deleted
    while the pass waited for the model on a newer chat, it gets no watermark and the pass ends as usual."""
    fields: dict[str, Any] = {"private": True}
    if quiet == "saving_off":
        fields = {"agent": Agent.objects.create(owner=owner, name="Chef", tools=["memory"], grants=["memory.write"],
                                                memory="own", memory_save="never")}
    gone = make_chat(owner, "Just between us: the spare key is under the blue pot.", ago=timedelta(hours=2),
                     **fields)
    if read_before:  # the pass counted it as read before; the owner typed more since
        consolidate_user(owner_id=owner.pk)
        assert ChatWatermark.objects.filter(chat=gone).exists()
        add_messages(gone, "And the alarm code is written on the fridge.", ago=timedelta(hours=2))
    make_chat(owner, LISBON, ago=timedelta(minutes=2))  # newer: read first, while the owner deletes the other
    model.script(meanwhile(lambda: chat_delete(owner_id=owner.pk, chat_id=gone.pk), LISBON_FACTS))

    result = consolidate_user(owner_id=owner.pk)

    assert (result.status, result.model_calls) == ("done", 1)
    assert sorted(p.topic for p in waiting(owner)) == ["diet", "home"]
    assert not Chat.objects.filter(pk=gone.pk).exists() and not ChatWatermark.objects.filter(chat_id=gone.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_chat_deleted_while_a_pass_with_memory_off_marks_it_read_is_passed_over_without_an_error(
        owner, model, make_chat):
    """Memory is off: the pass counts every chat as read without the model. A chat the owner is deleting at that
    moment (its delete holds the owner's lock, not yet committed) is left to the delete."""
    import threading

    gone = make_chat(owner, LISBON, ago=timedelta(hours=1))
    kept = make_chat(owner, "I am learning Portuguese.", ago=timedelta(hours=2))
    settings_update(user_id=owner.pk, enabled=False)
    deleting, may_commit = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def delete_the_chat() -> None:
        try:
            with transaction.atomic():
                chat_delete(owner_id=owner.pk, chat_id=gone.pk)
                deleting.set()
                may_commit.wait(10)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    def run_the_pass() -> None:
        try:
            result = consolidate_user(owner_id=owner.pk)
            assert (result.status, result.reason) == ("skipped", "memory_off")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    deleter = threading.Thread(target=delete_the_chat)
    deleter.start()
    assert deleting.wait(10)
    passing = threading.Thread(target=run_the_pass)
    passing.start()
    with connection.cursor() as cursor:
        for _ in range(2000):  # until the pass waits for a lock the delete holds (or has already gone by)
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            if cursor.fetchone()[0] or not passing.is_alive():
                break
            passing.join(0.005)
    may_commit.set()
    deleter.join(10)
    passing.join(10)

    assert errors == []
    assert not Chat.objects.filter(pk=gone.pk).exists() and not ChatWatermark.objects.filter(chat_id=gone.pk).exists()
    assert ChatWatermark.objects.get(chat=kept).private_seen  # the others are passed as before
