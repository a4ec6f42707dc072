"""Someone acts while the model thinks: a scripted model reply given only after an action ran."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection

from tests.fakes.openai_server import ScriptedReply, reply


def meanwhile(action: Callable[[], Any], answer: ScriptedReply | str) -> Callable[[dict[str, Any]], ScriptedReply]:
    """The model's ``answer`` (a text is a plain reply), given only after ``action`` ran — in the model server's
    thread, on its own database connection: the owner acts in another tab (deletes the chat, forgets
    everything) while a turn or a pass waits for the model."""

    def answer_after(_request: dict[str, Any]) -> ScriptedReply:
        try:
            action()
        finally:
            connection.close()
        return reply(answer) if isinstance(answer, str) else answer

    return answer_after
