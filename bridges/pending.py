"""Replies on their way: an answer cut off by a stopping ``runbridges`` is told, never silently lost.

The platforms take a message from the bot's process before it is answered (Telegram's next poll confirms the
update, Slack's and Discord's gateways hand it over once), so a process that stops in the middle of a turn
(a deploy past its grace, a crash, a kill) leaves a person who was never answered, and nothing would send
their message again. And the turn stores its message and the model's reply in the chat as soon as the model
has answered, before the bot sends it: cut off in between, the chat would show an answer the person never
got, and the owner and the model would take it as said.

So, in ``runbridges``, a message the bot answers is written down as it arrives (``PendingReply``), before it
waits for its turn (its chat's earlier messages, a free turn thread, Bolt's listener threads), given the answer
once the core has made it, and crossed out once that was sent. When a bot starts, whatever its
previous run left written down is cut off for good (its runs never overlap, and only runbridges writes
these): the bot sends the answer it had, late and saying so, or, when the turn had not answered yet, says
that it did not answer that message and asks for it again. The chat's log then holds what the person was
told: an answer stored and not sent is sent; a turn cut off before its answer stored nothing (a process
that ends stops waiting for the model; see ``bridges.runner``).

At least once: a process killed between sending and crossing out sends that answer again on its start. A
turn cut off in the instant between the model's answer being stored and being written down here is told as
unanswered, though its answer stays in the chat. The webhook and Events API paths of the web process write
nothing here: nobody could tell their orphans from turns still running there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone

from . import core, services
from .runtime import Revoked, _closing
from .selectors import replies_left

log = logging.getLogger(__name__)


#: The replies this process still works on, by id: False while the message waits for its turn (its chat's
#: earlier messages, a free turn thread), True once its turn runs. A bot restarted while the process runs (new
#: credentials) is cut off past its grace, but a turn's thread goes on and writes its answer down: the bot's
#: next run leaves these for the process's next start, which sends the answer late, rather than telling the
#: person it is lost while it is still coming. A message whose turn never started is let go (``release``).
_answering: dict[int, bool] = {}
_answering_lock = threading.Lock()


class GivenUp(Exception):
    """The message was let go before its turn started (its handling was cut off): the turn must not run, the
    bot's next start tells its sender."""


def answers(inbound: core.InboundMessage | None) -> bool:
    """Whether the bot owes ``inbound`` an answer to write down: a message for the bot (a tap is not one)."""
    return inbound is not None and inbound.addressed and inbound.answer is None


def keep(inbounds: Sequence[core.InboundMessage | None]) -> list[int | None]:
    """Write down the messages among ``inbounds`` the bot will answer, in one statement, as they arrive:
    before they wait for anything (their chat's earlier messages, a free turn thread; with more turns in flight
    than threads, a message may wait minutes), so a process that stops meanwhile leaves no message untold.
    Returns the row id of each (None: nothing to write down). Blocking; from async code ``keep_soon``."""
    owed = [inbound for inbound in inbounds if answers(inbound) and inbound is not None]
    if not owed:
        return [None] * len(inbounds)
    ids = iter(services.replies_pending_open(rows=[(inbound.binding_id, inbound.conversation_id, inbound.text)
                                                   for inbound in owed]))
    kept = [next(ids) if answers(inbound) else None for inbound in inbounds]
    with _answering_lock:
        _answering.update((pending_id, False) for pending_id in kept if pending_id is not None)
    return kept


#: The threads that write messages down as they arrive, never queued behind the turns (which may take every
#: turn thread for a minute each).
_writer = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bridges-pending")


async def keep_soon(inbounds: Sequence[core.InboundMessage | None]) -> list[int | None]:
    """``keep`` from async code, in threads of its own."""
    if not any(answers(inbound) for inbound in inbounds):
        return [None] * len(inbounds)
    return await asyncio.get_running_loop().run_in_executor(_writer, _closing(keep), inbounds)


def release(pending_id: int | None) -> None:
    """The handling of a written-down message ended in this process: if its turn never started (cancelled
    while it waited, failed before), its row is left for the bot's next start to tell. Idempotent."""
    if pending_id is None:
        return
    with _answering_lock:
        if _answering.get(pending_id) is False:
            del _answering[pending_id]


def answer(inbound: core.InboundMessage, *, pending_id: int | None) -> tuple[core.Reply, int | None]:
    """``core.handle`` for a message written down by ``keep`` (``pending_id``; None: nothing written down),
    whose row is given the answer after. Returns the reply and the id to ``sent`` once it was sent (None:
    nothing to cross out). GivenUp when the message was let go meanwhile. Blocking."""
    if pending_id is not None:
        with _answering_lock:
            if pending_id not in _answering:
                raise GivenUp(f"reply {pending_id} was let go before its turn")
            _answering[pending_id] = True
    kept = pending_id
    try:
        reply = core.handle(inbound)
        # the answer is written down before the row leaves _answering: a bot's next run that finds the row
        # then sends this answer late, never "please send it again" for an answer that exists
        if pending_id is not None:
            if reply.messages:
                services.reply_pending_answered(pending_id=pending_id, messages=[_data(o) for o in reply.messages])
            else:
                services.reply_pending_close(pending_id=pending_id)
                kept = None
    except BaseException:
        if pending_id is not None:  # handled (the platform's retry, or the error handler, takes it from here)
            services.reply_pending_close(pending_id=pending_id)
        raise
    finally:
        if pending_id is not None:
            with _answering_lock:
                _answering.pop(pending_id, None)
    return reply, kept


def sent(pending_id: int | None) -> None:
    """The reply of ``answer`` was sent (each message tried; one the platform refused is not tried again)."""
    if pending_id is not None:
        services.reply_pending_close(pending_id=pending_id)


def _data(outbound: core.Outbound) -> dict[str, Any]:
    return {"text": outbound.text,
            "buttons": [[button.label, button.answer, button.proposal_id] for button in outbound.buttons]}


def _outbound(data: dict[str, Any]) -> core.Outbound:
    return core.Outbound(str(data.get("text") or ""),
                         tuple(core.Button(str(label), answer, int(proposal_id))
                               for label, answer, proposal_id in data.get("buttons") or ()))


def _named(said: str) -> str:
    return f"\u201c{said}\u201d" if said else "a message without text"


def late_text(said: str) -> str:
    return f"Sorry for the wait: I was restarted while sending my answer to {_named(said)}. Here it is."


def cut_off_text(said: str) -> str:
    return f"Sorry, I was restarted before I could answer {_named(said)}. Please send it again."


#: A reply that could not be told for this long (the person blocked the bot, the chat is gone) is dropped.
TELL_FOR = timedelta(days=1)


def tell_left(*, binding_id: int, platform: str, credentials: dict[str, str]) -> int:
    """Send what the bot's previous run left on its way (see the module's docstring); returns how many replies
    were told. Called as the bot starts, before it takes new messages. Revoked is raised (the replies wait for
    a new token); a reply that fails otherwise (the sends retry passing failures already) is logged and
    tried again at the bot's next start, until it is ``TELL_FOR`` old. Blocking."""
    from .runner import adapter

    send = adapter(platform).send_message
    told = 0
    now = timezone.now()
    for pending in replies_left(binding_id=binding_id):
        with _answering_lock:
            if pending.pk in _answering:
                continue
        try:  # as it is now: its turn may have ended (and written its answer) while earlier rows were sent
            pending.refresh_from_db()
        except ObjectDoesNotExist:
            continue
        if now - pending.created_at >= TELL_FOR:  # a bot off for long: a message this old is not worth a word
            services.reply_pending_close(pending_id=pending.pk)
            continue
        if pending.messages:
            outbounds = [core.Outbound(late_text(pending.said)), *map(_outbound, pending.messages)]
        else:
            outbounds = [core.Outbound(cut_off_text(pending.said))]
        try:
            for outbound in outbounds:
                send(binding_id=binding_id, credentials=credentials, conversation_id=pending.conversation_id,
                     outbound=outbound)
        except Revoked:
            raise
        except Exception:
            log.warning("binding %s: a reply cut off by a restart could not be sent", binding_id, exc_info=True)
            if now - pending.created_at < TELL_FOR:
                continue
        else:
            told += 1
        services.reply_pending_close(pending_id=pending.pk)
    if told:
        log.info("binding %s: told %s replies cut off by a restart", binding_id, told)
    return told
