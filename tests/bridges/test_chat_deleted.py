"""The owner deletes a bot conversation's chat on the web: the bot's next message starts a new chat, the
conversation's notes stay, and a yes to a question from the deleted chat says why nothing was saved."""

from __future__ import annotations

import pytest

from bridges.models import Conversation
from localai_memory.chats.models import Chat, Message
from localai_memory.chats.services import chat_delete
from localai_memory.memory.models import Proposal
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from tests.bridges.conftest import dm_scope, notes_of, pair
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

VEGAN = {"kind": "memory", "topic": "diet", "summary": "vegan, no honey"}


def test_after_its_chat_is_deleted_the_next_message_starts_a_new_chat(bot, owner, model, alice):
    pair(bot, alice, can_confirm=True)
    scope: Scope = dm_scope(bot, alice)
    note_upsert(owner_id=owner.pk, scope=scope, topic="home", summary="lives in Rome", source="files")
    model.script(tool_calls(("propose_change", VEGAN)), reply("Good to know."))
    bot.dm(alice, "Remember that I am vegan.", expect=2)
    old = Conversation.objects.get(binding_id=bot.binding.pk).chat_id
    assert old is not None

    chat_delete(owner_id=owner.pk, chat_id=old)

    said = bot.dm(alice, "yes")  # the question asked in the deleted chat, the bot's last word to her

    assert "That note was not saved: Its chat was deleted" in said.text
    assert Proposal.objects.get().decided_by == "the chat was deleted"
    assert notes_of(owner, scope) == "- home: lives in Rome\n"

    model.script(reply("Hello again."))
    answered = bot.dm(alice, "Are you still there?")

    assert "Hello again." in answered.texts
    new = Conversation.objects.get(binding_id=bot.binding.pk).chat_id
    assert new is not None and new != old and not Chat.objects.filter(pk=old).exists()
    chat = Chat.objects.get(pk=new)
    assert chat.origin == "messaging" and chat.conversation_key == scope.key
    assert list(Message.objects.filter(chat=chat).order_by("id").values_list("role", flat=True)) == [
        "user", "assistant"]
    assert "lives in Rome" in model.last_messages[0]["content"]  # the conversation's notes are read as before


def test_a_message_whose_chat_the_owner_deletes_while_the_model_answers_is_answered_in_a_new_chat(bot, owner, model,
                                                                                                 alice):
    from django.db import connection

    pair(bot, alice)
    model.script(reply("Hi."))
    bot.dm(alice, "Hello there.")
    old = Conversation.objects.get(binding_id=bot.binding.pk).chat_id

    def delete_then_answer(_request):
        try:
            chat_delete(owner_id=owner.pk, chat_id=old)
        finally:
            connection.close()
        return reply("Paris.")

    model.script(delete_then_answer, reply("Paris."))
    answered = bot.dm(alice, "What is the capital of France?")

    assert "Paris." in answered.texts and "deleted" not in answered.text  # the person here deleted nothing
    new = Conversation.objects.get(binding_id=bot.binding.pk).chat_id
    assert new != old and list(Message.objects.filter(chat_id=new).values_list("content", flat=True)) == [
        "What is the capital of France?", "Paris."]
