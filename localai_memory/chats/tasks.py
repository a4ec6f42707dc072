"""Celery tasks of chats: a turn of a run that starts by itself (a trigger or a job).

A task is an API: it takes ids, loads the rows and calls one service. The policy makes such runs read per
the agent's choice and save nothing, whatever the task is asked.
"""

from __future__ import annotations

from celery import shared_task

from .models import Chat
from .services import ChatDeleted, turn_run


@shared_task(name="localai_memory.chats.tasks.run_turn", ignore_result=True)
def run_turn(chat_id: int, content: str) -> int | None:
    """Run one turn of chat ``chat_id`` with ``content`` as its message; returns the reply's message id, or
    None when the chat was deleted (before the turn, or while it ran: nothing is stored)."""
    chat = Chat.objects.select_related("agent").filter(pk=chat_id).first()
    if chat is None:
        return None
    try:
        return turn_run(chat=chat, content=content, typed_by_user=False).assistant_message_id
    except ChatDeleted:
        return None
