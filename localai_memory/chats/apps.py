from __future__ import annotations

from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "localai_memory.chats"
    label = "chats"

    def ready(self) -> None:
        from localai_memory.notes.services import NoteCopies, note_copies

        from .models import Message

        if not any(copies.name == "turn_memory_records" for copies in note_copies):
            # What memory did on a turn names the notes it read, saved or proposed, with their text.
            note_copies.append(NoteCopies(
                name="turn_memory_records",
                rows=lambda owner_id: Message.objects.filter(chat__owner_id=owner_id).exclude(memory={}),
                wipe=lambda rows: rows.update(memory={})))
