"""The Telegram bot's update processor: chats side by side, one chat's updates in order, and a busy chat
never holds the slots of the others."""

from __future__ import annotations

import asyncio
import datetime as dt

from telegram import Chat, Message, Update

from bridges.telegram.adapter import ChatOrderedUpdates


def _update(number: int, chat_id: int) -> Update:
    chat = Chat(id=chat_id, type="private")
    return Update(update_id=number, message=Message(message_id=number, date=dt.datetime.now(dt.UTC), chat=chat,
                                                     text=f"message {number}"))


def test_a_chat_whose_updates_wait_for_its_turn_holds_no_slot_of_another_chat():
    async def main() -> list[str]:
        processor = ChatOrderedUpdates(max_concurrent_updates=2)
        release = asyncio.Event()
        done: list[str] = []

        async def slow(name: str) -> None:
            await release.wait()
            done.append(name)

        async def quick(name: str) -> None:
            done.append(name)

        busy = [asyncio.create_task(processor.process_update(_update(n, 1), slow(f"A{n}"))) for n in (1, 2, 3)]
        await asyncio.sleep(0)  # the busy chat's three updates are in: one runs, two wait for their turn
        other = asyncio.create_task(processor.process_update(_update(4, 2), quick("B4")))
        await asyncio.wait_for(other, timeout=5)  # served at once, though the busy chat has three updates
        release.set()
        await asyncio.gather(*busy)
        return done

    assert asyncio.run(main()) == ["B4", "A1", "A2", "A3"]
