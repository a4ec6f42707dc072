"""The platform-neutral core of the bots: one inbound message in, what the bot says back out.

An adapter (``bridges/telegram``, ``bridges/slack``, ``bridges/discord``) only translates: it turns the
platform's event into an ``InboundMessage``, calls ``handle`` (a blocking call; from async code through
``bridges.runtime.run_sync``), and sends the ``Reply``. Everything else lives here once:

* de-duplication of deliveries (a platform retry is handled once);
* the conversation (one-to-one only when the platform said so; unknown counts as a group) and the sender;
* pairing: an unpaired sender gets a short code and nothing of theirs reaches the model;
* the turn, with origin ``messaging``, through ``chats.services.turn_run`` (the policy decides memory there);
* the answers in the chat: "yes"/"no" to the question it replies to, else to the most recent open proposal
  the sender may answer (``memory.proposals``, which applies the policy's may-answer rule) while the model
  has not answered them since the bot asked (after that a plain yes is theirs to the model; one from a sender
  who may answer none of those waiting is told why it does not count while the question is the bot's last
  word there, and is otherwise, as one when nothing waits, an ordinary message), and "undo" of an automatic
  note within its window (``notes.services.change_undo``). In a group only an answer said to the bot counts.

This module must never decide a memory rule itself: who may answer, whether a note saves at once, and how
long a proposal or an Undo lives are the policy's, applied by the services it calls.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from localai_memory.chats import services as chats_services
from localai_memory.chats.llm import ModelBusy, ModelRefused
from localai_memory.chats.models import Chat
from localai_memory.chats.selectors import answered_since, sender_spoke_at, turn_facts
from localai_memory.core.errors import ApplicationError, Conflict, Forbidden, Gone, NotFound, UpstreamError
from localai_memory.memory import policy
from localai_memory.memory import proposals as proposals_services
from localai_memory.memory.models import Proposal
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.paths import Scope, channel_key

from . import services
from .models import Binding, Conversation, ConversationKind, Notice, NoticeKind, Sender, SenderStatus

log = logging.getLogger(__name__)

Kind = Literal["one_to_one", "group", "unknown"]
Answer = Literal["yes", "no"]

# An answer is a short message of nothing but a yes (or nothing but a no), in the languages the app reads
# (English, German, French, Spanish, Italian, Portuguese, Dutch and a few more) or as a thumb, with at most
# a word of politeness or the words of the button ("Yes, save it"). Anything else is a message for the model:
# "yes but the bike is red", "ok, what about tomorrow?" (a question is no answer).
_YES_WORDS = frozenset({
    "yes", "y", "yep", "yeah", "yea", "yup", "sure", "ok", "okay", "okey", "k",  # en
    "ja", "jawohl", "jo", "jep", "klar", "gerne",  # de (ja also nl, sv, da, no)
    "oui", "ouais", "d'accord", "dac",  # fr
    "sí", "si", "vale", "claro",  # es (claro also pt)
    "sì", "certo", "va",  # it ("va bene")
    "sim",  # pt
    "jazeker", "jawel", "oké", "prima",  # nl
    "tak", "ano", "kyllä", "igen", "evet", "да", "はい", "是", "是的", "好", "好的", "네", "예",
    "نعم", "כן",
    "👍", "✅", "👌", "✔", "☑",
})
_NO_WORDS = frozenset({
    "no", "n", "nope", "nah",  # en (no also es, it)
    "nein", "nö", "ne",  # de
    "non",  # fr
    "não", "nao",  # pt
    "nee", "neen",  # nl
    "nej", "nei", "nie", "ei", "nem", "hayır", "hayir", "нет", "いいえ", "不", "不是", "不要", "아니요",
    "아니오", "لا", "לא",
    "👎", "❌", "✖",
})
#: Words that go with an answer of either kind: politeness, in the same languages.
_POLITE_WORDS = frozenset({
    "please", "pls", "plz", "thanks", "thank", "you", "thx", "ty", "bitte", "danke", "schön", "merci",
    "beaucoup", "s'il", "te", "vous", "plaît", "plait", "gracias", "por", "favor", "grazie", "per", "favore",
    "bene", "obrigado", "obrigada", "graag", "dank", "je", "bedankt", "alsjeblieft", "alstublieft",
    "🙏", "🙂", "😊",
})
#: The words of the buttons ("Yes, save it", "No, drop it", "Yes, forget it", "No, keep it").
_YES_EXTRA = frozenset({"save", "forget", "it", "do", "confirm"})
_NO_EXTRA = frozenset({"drop", "keep", "it", "don't", "dont"})
#: The most words (or emoji) an answer has.
_ANSWER_MAX_WORDS = 6
#: What an emoji may carry that does not change it (a skin tone, the emoji presentation selector).
_EMOJI_MODIFIERS = re.compile("[\ufe0f\U0001f3fb-\U0001f3ff]")


@dataclass(frozen=True)
class InboundMessage:
    """One message (or button tap) from a platform, as the core understands it."""

    binding_id: int
    conversation_id: str
    """The platform's id of the chat (Telegram chat id, Slack channel id, Discord channel id)."""
    kind: Kind
    """What the platform said: a direct message, a group, or nothing clear (counts as a group)."""
    sender_id: str
    sender_display: str
    text: str = ""
    delivery_key: str | None = None
    """A key unique per delivery (``update:<id>``, ``event:<id>``, ``message:<id>``); repeats are dropped."""
    conversation_title: str = ""
    addressed: bool = True
    """The message is for the bot: a direct message, a mention, a reply to the bot or a command. In a group
    the bot ignores other messages, a bare yes/no/undo included (buttons always count)."""
    answer: Answer | None = None
    """A tap on a Yes/No button."""
    reply_to: str = ""
    """The platform's id of the bot's message this one replies to, if any: a yes/no replying to a question
    answers that question (``question_sent`` recorded which message asked it)."""
    proposal_id: int | None = None
    """The proposal the tapped button belongs to."""
    unreadable: bool = False
    """It carried something the bot cannot read (a photo, a file, a sticker) and no text: answered with
    ``UNREADABLE_TEXT`` where a text would have been answered. Text that came with media (a caption) is
    ``text``."""
    known_only: bool = False
    """Only for a conversation the bot has had before (a Slack slash command can be typed where the bot is
    not, such as a direct message between two people, and says nothing of it): anywhere else the bot answers
    ``NOT_HERE_TEXT`` and keeps nothing, not even the sender."""


@dataclass(frozen=True)
class Button:
    label: str
    answer: Answer
    proposal_id: int


@dataclass(frozen=True)
class Outbound:
    """One message the bot sends, optionally with one-tap buttons (where the platform has them)."""

    text: str
    buttons: tuple[Button, ...] = ()
    formatted: bool = False
    """The text is the model's answer, which may use the platform's formatting (bold, code, lists). Otherwise
    it is the bot's own words around what a note or a person said (a question, a "Saved", a notes listing, an
    Undo): the adapter sends it so that every character shows as written, since a note reading ``*bold*``,
    ``<!channel>`` or ``@everyone`` must neither render as markup nor ping anyone."""

    def parts(self, limit: int, measure: Callable[[str], int] = len) -> list[Outbound]:
        """The message as the platform can take it: texts of at most ``limit`` (as ``measure`` counts), cut
        at a paragraph, else a line, else a word; the buttons go under the last part."""
        texts = split_text(self.text, limit, measure)
        return [Outbound(text, self.buttons if index == len(texts) - 1 else (), self.formatted)
                for index, text in enumerate(texts)]


def split_text(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """``text`` in pieces of at most ``limit`` (as ``measure`` counts: platforms count differently), each cut
    at the last paragraph break, else line break, else space, in the piece's second half; a word longer
    than that is cut where the limit falls. Whitespace at a cut is dropped; an empty text is one empty piece."""
    pieces: list[str] = []
    rest = text.strip()
    while measure(rest) > limit:
        low, high = 1, len(rest)  # the longest prefix that fits (measure grows with the prefix)
        while low < high:
            middle = (low + high + 1) // 2
            if measure(rest[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        window = rest[:low]
        cut = low
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at >= low // 2:
                cut = at
                break
        piece = rest[:cut].rstrip()
        if piece:
            pieces.append(piece)
        rest = rest[cut:].lstrip()
    if rest or not pieces:
        pieces.append(rest)
    return pieces


@dataclass
class Reply:
    messages: list[Outbound] = field(default_factory=list)
    answered: str | None = None
    """For a button tap: one line about the outcome (the adapter shows it on the question it answered)."""
    settled: bool = False
    """For a button tap: the question is answered for good (the adapter may remove its buttons)."""
    private: bool = False
    """For a button tap: ``messages`` are for the tapper alone. The adapter shows them where nobody else sees
    them (Telegram's answer to the tap, a Slack ephemeral message, a Discord ephemeral response), or not at
    all, and never posts them in the chat."""
    duplicate: bool = False


# --------------------------------------------------------------------------------------------------------
# What the bot says
# --------------------------------------------------------------------------------------------------------

_SCOPE_WORDS = {"channel": "this conversation's notes", "agent": "the agent's notes", "user": "the owner's notes"}


def pairing_text(code: str | None, expires_at: datetime | None) -> str:
    if code is None:
        return ("This bot is private and too many pairing requests wait already. Try again later, or ask its "
                "owner to pair you.")
    minutes = max(1, int((expires_at - timezone.now()).total_seconds() // 60)) if expires_at else 60
    return (f"This bot is private. To talk to it, ask its owner to approve the pairing code {code} "
            f"(valid for {minutes} minutes). Until then nothing you write is passed on.")


#: How much of the note a question would replace it quotes (the index line can be longer than a summary).
BEFORE_MAX_CHARS = 120


def _quoted_before(line: str) -> str:
    """The note's current line as a question quotes it: one line, cut at a word past ``BEFORE_MAX_CHARS``."""
    line = " ".join(line.split())
    if len(line) > BEFORE_MAX_CHARS:
        line = line[:BEFORE_MAX_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "\u2026"
    return f"\u201c{line}\u201d"


def question_text(*, summary: str, topic: str, scope: str, requester_can_answer: bool, delete: bool = False,
                  only_requester: str | None = None, before: tuple[str, str] = ("", "")) -> str:
    """The question under the Yes/No buttons. ``only_requester``: why only the person who asked may answer it
    (a key of ``policy.MESSAGES``: ``answer_requester_only`` under Always confirm, ``confirm_other_scope``),
    said where others could answer it too (a group). ``before``: the note the proposal changes, (line, topic
    file) as the person would see it beside the suggestion in the web inbox (``Proposal.shown_before``); its
    line is quoted, short, so nobody says yes to replacing or forgetting a note they cannot see. Only a note of
    the conversation's own (``channel``) is quoted: the owner's own and the agent's are not shown in a chat
    others may read (as ``/memory`` lists only the conversation's); the owner sees them on the web."""
    where = _SCOPE_WORDS.get(scope, "memory")
    line, details = before
    hidden = scope != "channel" and bool(line or details)
    if hidden:
        line = details = ""
    if delete:
        now = f" ({_quoted_before(line)})" if line else ""
        text = (f"I can forget the note \u201c{topic}\u201d{now} in {where}. Reply yes to forget it or no to keep "
                "it.")
    else:
        replaces = ""
        if hidden:
            replaces = (f" It would replace the note \u201c{topic}\u201d as it is now (the owner sees it on the "
                        "web).")
        elif line and line != summary:
            replaces = f" It would replace {_quoted_before(line)}."
        elif details:
            replaces = " It would replace the note's details."
        elif line:  # the same line and no details yet: the proposal brings them
            replaces = " It would add details to the note."
        text = (f"I can save a note to {where}: \u201c{summary}\u201d ({topic}).{replaces} Reply yes to save it or no "
                "to drop it.")
    if not requester_can_answer:
        text += (" You cannot confirm notes here yourself, so it waits for the owner or for someone the owner "
                 "allows to confirm changes.")
    elif only_requester == "answer_requester_only":
        text += " Always confirm is on, so only the person who asked can confirm it here."
    elif only_requester == "confirm_other_scope":
        text += " It is for more than this conversation, so only the person who asked can confirm it here."
    return text


def saved_text(*, summary: str, topic: str, scope: str, before: dict[str, str | None] | None = None) -> str:
    """What the bot says of a note saved at once; with ``before`` (the note it replaced, as the turn's report
    gives it), what that note said, as the web chat shows it struck through."""
    where = _SCOPE_WORDS.get(scope, "memory")
    replaced = ""
    if before and before.get("summary") and before["summary"] != summary:
        replaced = f" It replaces \u201c{before['summary']}\u201d."
    elif before:
        replaced = " It replaces the note's earlier details."
    return (f"Saved to {where}: \u201c{summary}\u201d ({topic}).{replaced} Reply undo within 30 minutes to take it "
            "back.")


#: The policy's reasons an answer does not count that are about who answers (``policy.answer_refusal``); the
#: others (memory or saving off in this chat now, a scope it may not save to) follow ``NOT_CONFIRMABLE_TEXT``.
_WHO_MAY_ANSWER = frozenset({"answer_needs_confirmer", "answer_requester_only", "confirm_other_scope"})
NOT_CONFIRMABLE_TEXT = "This note cannot be confirmed in the chat now, so it waits for the owner."


def refusal_text(reason: str | None) -> str:
    """What an answer that does not count is told, for the policy's ``reason`` (``policy.answer_refusal``)."""
    if reason is None or reason not in policy.MESSAGES:
        return policy.MESSAGES["answer_needs_confirmer"]
    if reason in _WHO_MAY_ANSWER:
        return policy.MESSAGES[reason]
    return f"{NOT_CONFIRMABLE_TEXT} {policy.MESSAGES[reason]}"


EXPIRED_TEXT = "That note was not saved: a proposal waits 24 hours for an answer, and this one expired."
EXPIRED_FORGET_TEXT = ("That note was not forgotten: a proposal waits 24 hours for an answer, and this one "
                       "expired.")
UNDO_CLOSED_TEXT = ("Too late to undo here: a note can be undone for 30 minutes after it was saved. The owner "
                    "can restore an earlier version from Files.")
ERROR_TEXT = "Sorry, I could not answer just now. Please try again in a moment."
#: The model server refused the request itself (``chats.llm.ModelRefused``: 400, 413, 422), most often a
#: conversation grown past the model's context; every later message would be refused the same way.
MODEL_REFUSED_TEXT = ("Sorry, the model refused this conversation: it may have grown too long for the model. Send "
                      "/new to start a fresh chat; this conversation's notes stay.")


def busy_text(retry_after: str | None) -> str:
    """What a message is told when the model server is rate limiting (``chats.llm.ModelBusy``, a 429): when to
    send it again, from the server's Retry-After in seconds (5 when it gave none or a date)."""
    seconds = int(retry_after) if retry_after and retry_after.isascii() and retry_after.isdigit() else 5
    seconds = max(1, seconds)
    if seconds < 90:
        wait = "1 second" if seconds == 1 else f"{seconds} seconds"
    else:
        minutes = -(-seconds // 60)
        wait = f"{minutes} minutes" if minutes < 120 else f"{-(-minutes // 60)} hours"
    return f"Sorry, the model is busy with other requests just now. Please send your message again in about {wait}."


NEW_CHAT_TEXT = ("Started a fresh chat: I no longer read what was said here before. This conversation's notes "
                 "stay (/memory lists them).")
NEW_CHAT_REFUSED_TEXT = ("Only someone the owner allows to confirm changes can start a fresh chat for everyone here. "
                         "In your direct chat with me, /new starts a fresh chat of your own.")
HELP_TEXT = ("You are paired with this bot. Write to me as you would in the chat. To save a note yourself, write "
             "/remember and the fact, for example: /remember I live in Rome. /memory lists this conversation's "
             "notes. /new starts a fresh chat: I forget what was said here before, and the notes stay.")
#: The commands that start a fresh chat (``_start_over``).
NEW_CHAT_COMMANDS = ("/new", "/reset")
NO_ANSWER_TEXT = "(The assistant gave no answer to that.)"
UNREADABLE_TEXT = "I can only read text messages."
UNPAIRED_TAP_TEXT = ("Only people paired with this bot can answer its questions, so your tap did not count. Write "
                     "to the bot to get a pairing code.")
NOT_HERE_TEXT = ("I keep notes only for a conversation I have had with you: write me a message first (directly, "
                 "or by mentioning me in a channel I was invited to), then use /remember there.")


# --------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------


def handle(message: InboundMessage) -> Reply:
    """Everything the bot does for one inbound message. Blocking (database and model calls).

    A bot switched off, or whose owner's account was suspended (unticked "Active" in the admin), says and
    saves nothing, also while it still runs until ``runbridges`` next looks at the bindings."""
    binding = (Binding.objects.select_related("agent")
               .filter(pk=message.binding_id, enabled=True, owner__is_active=True).first())
    if binding is None:
        return Reply()
    key = message.delivery_key
    if key and not services.delivery_claim(binding_id=binding.pk, key=key):
        log.info("binding %s: delivery %s handled already", binding.pk, key)
        return Reply(duplicate=True)
    try:
        return _handle(binding, message)
    except Exception:
        if key:  # let the platform's retry try again
            services.delivery_release(binding_id=binding.pk, key=key)
        raise


def _handle(binding: Binding, message: InboundMessage) -> Reply:
    if message.known_only and not Conversation.objects.filter(
            binding=binding, external_id=str(message.conversation_id)[:200]).exists():
        return Reply([Outbound(NOT_HERE_TEXT)])
    conversation = _conversation_seen(binding, message)
    sender = services.sender_seen(binding_id=binding.pk, external_id=message.sender_id,
                                  display=message.sender_display)
    if message.answer is not None:
        return _tap(binding, conversation, sender, message.answer, message.proposal_id)
    if sender.status == SenderStatus.BLOCKED:
        return Reply()
    text = message.text.strip()
    if not sender.paired:
        if conversation.kind != ConversationKind.ONE_TO_ONE and not message.addressed:
            return Reply()
        offer = services.pairing_offer(sender=sender)
        return Reply([Outbound(pairing_text(offer.code, offer.expires_at))])
    word = _word(text)
    # In a group, only a yes/no/undo said to the bot answers it (Bob's "no" to a colleague is not one); an
    # answer that answers nothing open goes on as any message.
    for_the_bot = conversation.kind == ConversationKind.ONE_TO_ONE or message.addressed
    if (word == "yes" or word == "no") and for_the_bot:
        question = (_question_to_answer(binding, conversation, sender, message.reply_to)
                    or _question_not_theirs(binding, conversation))
        if question is not None:
            return _answer(binding, conversation, sender, word, [question], tapped=False)
    if word == "undo" and for_the_bot and _undoable(conversation).exists():
        return _undo(binding, conversation, sender)
    if not for_the_bot:
        return Reply()
    if not text:
        return Reply([Outbound(UNREADABLE_TEXT)]) if message.unreadable else Reply()
    if text.split()[0].lower() == "/memory":
        return _notes_here(binding, conversation, sender)
    if text.lower() in ("/start", "/help"):
        return Reply([Outbound(HELP_TEXT)])
    if text.lower() in NEW_CHAT_COMMANDS:
        return _start_over(conversation, sender)
    # A yes or no with more said ("yes but the bike is red") is the model's to answer; the question it may
    # have meant to answer is named after that, so nobody thinks it was answered.
    waiting = _question_to_answer(binding, conversation, sender, message.reply_to) if _leans(text) else None
    reply = _turn(binding, conversation, sender, text)
    if waiting is not None:
        still = _still_asks_text(binding, waiting)
        if still:
            reply.messages.append(Outbound(still))
            _asked_again(Notice.objects.filter(pk=waiting.pk))  # the bot's last word here asks for it again
    return reply


def _still_asks_text(binding: Binding, notice: Notice) -> str | None:
    """A line naming a question that still waits for a plain yes or no, or None once it does not."""
    if not Notice.objects.filter(pk=notice.pk, closed_at__isnull=True).exists():
        return None
    proposal = Proposal.objects.filter(pk=notice.proposal_id or 0, owner_id=binding.owner_id,
                                       status=Proposal.Status.PENDING).first()
    if proposal is None:
        return None
    if proposal.is_delete:
        return (f"The note \u201c{notice.topic}\u201d still waits to be forgotten: reply yes to forget it or no to "
                "keep it.")
    return (f"The note \u201c{notice.summary}\u201d ({notice.topic}) still waits: reply yes to save it or no to "
            "drop it.")


def _start_over(conversation: Conversation, sender: Sender) -> Reply:
    """``/new`` (or ``/reset``): the conversation goes on in a new chat, made on its next turn, that reads
    nothing said before, so a conversation grown past the model's context can go on. What belongs to the
    conversation stays: its notes, the questions waiting here, the Undo of a note just saved, and the old
    chat, which the owner still finds on the web.

    In a group (or a chat not known to be one-to-one) it ends the chat of everyone there, so only a sender the
    owner allows to confirm changes may do it (the owner's own paired account is one, once the owner ticks
    that); the spec names nobody else who controls a group's conversation. Anyone else is told why, and that
    their own direct chat with the bot is theirs to start over."""
    if conversation.kind != ConversationKind.ONE_TO_ONE and not sender.can_confirm:
        return Reply([Outbound(NEW_CHAT_REFUSED_TEXT)])
    Conversation.objects.filter(pk=conversation.pk).update(chat=None)
    conversation.chat_id = None
    return Reply([Outbound(NEW_CHAT_TEXT)])


#: The most lines ``/memory`` lists in a chat (an index holds at most 40).
NOTES_LISTED = 40


def _notes_here(binding: Binding, conversation: Conversation, sender: Sender) -> Reply:
    """``/memory``: the conversation's own notes ("everything visible"), and a first line when memory does not
    use them here now (off at some level, or an add-on serving memory). The owner's own and the agent's notes,
    which the model reads here too, are not listed in a chat others may read; the owner sees every note on the
    web."""
    decision = policy.decide_turn(turn_facts(chat=_chat(binding, conversation), sender=_turn_sender(sender)))
    lines: list[str] = []
    if not decision.memory_on:
        lines.append(f"Memory is off here, so the assistant reads none of these. {decision.fix}")
    elif decision.served_by == "addon":
        lines.append("Your memory add-on serves memory now, so the assistant reads none of these built-in notes.")
    entries = notes_selectors.index_entries(owner_id=binding.owner_id,
                                            scope=Scope("channel", conversation.channel_key))
    if not entries:
        lines.append("This conversation has no notes yet. Write /remember and a fact to add one.")
        return Reply([Outbound("\n".join(lines))])
    lines.append(f"This conversation's notes ({len(entries)}):")
    lines += [f"- {entry.topic}: {entry.summary}" for entry in entries[:NOTES_LISTED]]
    lines.append("Write /remember and a fact to add one; the owner sees and edits every note on the Memory tab.")
    return Reply([Outbound("\n".join(lines))])


def _words(text: str) -> list[str] | None:
    """The words and emoji of ``text``, lower case, without punctuation (a leading "/" of "/yes" too), or None
    for a question (a "?" in it)."""
    text = _EMOJI_MODIFIERS.sub("", text.strip().lower().replace("\u2019", "'"))
    if any(mark in text for mark in "?\uff1f\u00bf"):
        return None
    tokens = re.findall(r"\w+(?:'\w+)*|[^\w\s]", text)
    return [token for token in tokens if not unicodedata.category(token[0]).startswith("P")]


def _word(text: str) -> Literal["yes", "no", "undo"] | None:
    """``text`` as an answer: "yes", "no" or "undo" when it is nothing but one (see ``_YES_WORDS``), else
    None (a message for the model)."""
    words = _words(text)
    if not words or len(words) > _ANSWER_MAX_WORDS:
        return None
    if words == ["undo"]:
        return "undo"
    yes, no = any(word in _YES_WORDS for word in words), any(word in _NO_WORDS for word in words)
    if yes == no:
        return None  # neither, or both ("yes no")
    kind, extra = (_YES_WORDS, _YES_EXTRA) if yes else (_NO_WORDS, _NO_EXTRA)
    if all(word in kind or word in extra or word in _POLITE_WORDS for word in words):
        return "yes" if yes else "no"
    return None


def _leans(text: str) -> bool:
    """``text`` starts with a yes or a no but says more ("yes but the bike is red"), and asks nothing: the
    model answers it, and a question still waiting is named after its answer."""
    words = _words(text)
    if not words:
        return False
    return (words[0] in _YES_WORDS or words[0] in _NO_WORDS) and _word(text) is None


def _conversation_seen(binding: Binding, message: InboundMessage) -> Conversation:
    now = timezone.now()
    kind = message.kind if message.kind in ConversationKind.values else ConversationKind.UNKNOWN
    conversation, created = Conversation.objects.get_or_create(
        binding=binding, external_id=str(message.conversation_id)[:200],
        defaults={"kind": kind, "title": message.conversation_title[:200], "last_message_at": now,
                  "channel_key": channel_key(binding.pk, str(message.conversation_id))})
    if not created:
        updates: dict[str, object] = {"last_message_at": now}
        if kind != ConversationKind.UNKNOWN and conversation.kind != kind:
            updates["kind"] = kind  # the platform said more this time
        if message.conversation_title and message.conversation_title != conversation.title:
            updates["title"] = message.conversation_title[:200]
        Conversation.objects.filter(pk=conversation.pk).update(**updates)
        for name, value in updates.items():
            setattr(conversation, name, value)
        if "kind" in updates and conversation.chat_id is not None:
            chats_services.chat_update(owner_id=binding.owner_id, chat_id=conversation.chat_id,
                                       one_to_one=conversation.one_to_one)
    return conversation


def _chat(binding: Binding, conversation: Conversation) -> Chat:
    """The conversation's chat, made on its first turn (origin messaging, the binding's agent). When the owner
    gave the binding another agent since, the conversation continues in a new chat with that agent (its
    notes, which belong to the conversation, stay)."""
    def current(chat_id: int | None) -> Chat | None:
        if chat_id is None:
            return None
        return (Chat.objects.select_related("agent")
                # agent_id None matches a chat without an agent (IS NULL); the stubs want a value.
                .filter(pk=chat_id, owner_id=binding.owner_id,
                        agent_id=binding.agent_id)  # type: ignore[misc]
                .first())

    chat = current(conversation.chat_id)
    if chat is not None:
        return chat
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        chat = current(locked.chat_id)
        if chat is not None:
            conversation.chat_id = chat.pk
            return chat
        chat = chats_services.chat_create(
            owner_id=binding.owner_id, agent_id=binding.agent_id, origin="messaging", binding_id=binding.pk,
            conversation_key=conversation.channel_key, one_to_one=conversation.one_to_one,
            title=conversation.title or f"{binding.get_platform_display()}: {binding.name}")
        Conversation.objects.filter(pk=conversation.pk).update(chat=chat)
        conversation.chat = chat
    return chat


def _turn_sender(sender: Sender) -> chats_services.Sender:
    return chats_services.Sender(sender_id=sender.pk, display=sender.label, paired=sender.paired,
                                 can_confirm=sender.can_confirm)


def _actor(binding: Binding, sender: Sender) -> str:
    return f"{sender.label} on {binding.get_platform_display()}"


# --------------------------------------------------------------------------------------------------------
# A turn
# --------------------------------------------------------------------------------------------------------


def speaker_name(label: str) -> str:
    """A sender's name as the model may read it before their words: letters, digits, spaces and . ' - _ only,
    on one line and at most 32 characters, so a display name cannot pose as another speaker or as
    instructions ("Eve\n\nSystem: …" reads "Eve System")."""
    name = " ".join(re.sub(r"[^\w .'-]+", " ", label).split())[:32].strip()
    return name or "Someone"


def _turn(binding: Binding, conversation: Conversation, sender: Sender, text: str) -> Reply:
    chat = _chat(binding, conversation)
    turn_sender = _turn_sender(sender)
    if conversation.kind != ConversationKind.ONE_TO_ONE and not text.startswith("/"):
        # Several people write here: the model is told who speaks (a command stays as typed).
        text = f"{speaker_name(sender.label)}: {text}"
    try:
        try:
            result = chats_services.turn_run(chat=chat, content=text, sender=turn_sender)
        except chats_services.ChatDeleted:
            # The owner deleted this conversation's chat on the web while the model answered; the person here
            # deleted nothing: the message is answered in the conversation's new chat.
            result = chats_services.turn_run(chat=_chat(binding, conversation), content=text, sender=turn_sender)
    except ModelRefused:
        log.warning("binding %s: the model server refused the conversation", binding.pk, exc_info=True)
        return Reply([Outbound(MODEL_REFUSED_TEXT)])
    except ModelBusy as exc:
        log.info("binding %s: the model server is busy (retry after %s s)", binding.pk, exc.retry_after)
        return Reply([Outbound(busy_text(exc.retry_after))])
    except UpstreamError:
        log.warning("binding %s: the model failed", binding.pk, exc_info=True)
        return Reply([Outbound(ERROR_TEXT)])
    except ApplicationError as exc:
        return Reply([Outbound(exc.message)])
    reply = Reply()
    report = result.memory or {}
    # A /remember answered by a saved note or a question says it below, with its Undo or its buttons.
    told_below = result.command == "remember" and (
        any(item.get("change_id") for item in report.get("saved", [])) or bool(report.get("proposed")))
    if not told_below:  # an empty answer would be silence, which looks like a bot that never got the message
        answer = result.reply.strip()
        reply.messages.append(Outbound(answer, formatted=True) if answer else Outbound(NO_ANSWER_TEXT))
    now = timezone.now()
    for saved in report.get("saved", []):
        if not saved.get("change_id") and saved.get("provider"):  # a memory add-on took it: it keeps no Undo here
            reply.messages.append(Outbound(f"Saved by your memory add-on: \u201c{saved.get('summary') or ''}\u201d "
                                           f"({saved['topic']})."))
            continue
        if not saved.get("change_id"):
            continue
        undo_until = parse_datetime(saved["undo_until"]) if saved.get("undo_until") else None
        Notice.objects.create(conversation=conversation, kind=NoticeKind.SAVED, change_id=saved["change_id"],
                              undo_until=undo_until, sender=sender, topic=saved.get("topic", "")[:40],
                              summary=(saved.get("summary") or "")[:300], created_at=now)
        reply.messages.append(Outbound(saved_text(summary=saved.get("summary") or "", topic=saved["topic"],
                                                  scope=saved.get("scope", "channel"),
                                                  before=saved.get("before"))))
    asked: set[int] = set()
    for proposed in report.get("proposed", []):
        proposal = Proposal.objects.filter(pk=proposed["proposal_id"], owner_id=binding.owner_id).first()
        if proposal is None or proposal.pk in asked:
            continue
        asked.add(proposal.pk)
        # Asked again (the model proposed the same note while it waits): this question is the open one; the
        # earlier one is closed but keeps its message, so a reply to either answers this proposal.
        _open_questions(conversation).filter(proposal_id=proposal.pk).update(closed_at=now)
        Notice.objects.create(conversation=conversation, kind=NoticeKind.QUESTION, proposal_id=proposal.pk,
                              sender=sender, topic=proposal.topic, summary=proposal.summary[:300], created_at=now,
                              asked_at=now)
        facts = turn_facts(chat=chat, sender=turn_sender)
        scope = proposal.scope_kind
        requester_only = proposal.requester_only or proposal.locked
        can_answer = policy.answer_refusal(
            facts, requester_only=requester_only, locked=proposal.locked, scope=scope,  # type: ignore[arg-type]
            answerer_paired=sender.paired, answerer_can_confirm=sender.can_confirm,
            answerer_is_requester=True) is None
        # In a group, what a permitted sender other than the one who asked would be told: under Always confirm,
        # or for a note beyond this conversation, only the one who asked may answer.
        others = (policy.answer_refusal(
            facts, requester_only=requester_only, locked=proposal.locked, scope=scope,  # type: ignore[arg-type]
            answerer_paired=True, answerer_can_confirm=True, answerer_is_requester=False)
            if can_answer and conversation.kind != ConversationKind.ONE_TO_ONE else None)
        text_ = question_text(summary=proposal.summary, topic=proposal.topic, scope=proposal.scope_kind,
                              requester_can_answer=can_answer, delete=proposal.is_delete,
                              only_requester=others if others in ("answer_requester_only", "confirm_other_scope")
                              else None, before=proposal.shown_before)
        yes, no = ("Yes, forget it", "No, keep it") if proposal.is_delete else ("Yes, save it", "No, drop it")
        reply.messages.append(Outbound(text_, buttons=(Button(yes, "yes", proposal.pk), Button(no, "no", proposal.pk))))
    return reply


# --------------------------------------------------------------------------------------------------------
# Answers: yes / no / undo
# --------------------------------------------------------------------------------------------------------


def _open_questions(conversation: Conversation):
    return Notice.objects.filter(conversation=conversation, kind=NoticeKind.QUESTION, closed_at__isnull=True)


def _open_saves(conversation: Conversation):
    return Notice.objects.filter(conversation=conversation, kind=NoticeKind.SAVED, closed_at__isnull=True)


def _undoable(conversation: Conversation):
    """The open saves whose Undo window has not passed; those past it are closed first, so a later "undo" is
    an ordinary message (the store checks the window again when one is undone)."""
    _open_saves(conversation).filter(undo_until__lt=timezone.now()).update(closed_at=timezone.now())
    return _open_saves(conversation)


def _close(notice: Notice) -> None:
    Notice.objects.filter(pk=notice.pk, closed_at__isnull=True).update(closed_at=timezone.now())


def _asked_again(questions: QuerySet[Notice]) -> None:
    """The bot's words just named ``questions`` as waiting for a yes or no: a plain one answers them again."""
    questions.update(asked_at=timezone.now())


def _asked_at(notice: Notice) -> datetime:
    """When the bot last asked for a yes or no to ``notice``'s question (a question kept before the field was
    added: when it was asked)."""
    return notice.asked_at or notice.created_at


def question_sent(*, binding_id: int, conversation_id: str, proposal_id: int, message_ref: str) -> None:
    """Record which platform message asked about ``proposal_id`` in a conversation, so a reply to it answers
    it (an adapter calls this once the question's message is sent; on Slack, a question asked in a thread is
    recorded as that thread, since a reply there names the thread). A question asked earlier keeps its own."""
    Notice.objects.filter(conversation__binding_id=binding_id, conversation__external_id=str(conversation_id)[:200],
                          kind=NoticeKind.QUESTION, proposal_id=proposal_id,
                          message_ref="").update(message_ref=message_ref[:64])


def _tap(binding: Binding, conversation: Conversation, sender: Sender, answer: Answer,
         proposal_id: int | None) -> Reply:
    """A tap on a Yes/No button. Checked before anything is said, as a message is: a blocked sender's tap is
    ignored without a word, and an unpaired sender's is answered to them alone (``Reply.private``), so nobody
    the owner did not pair can make the bot post in a chat, once per tap."""
    if sender.status == SenderStatus.BLOCKED:
        return Reply()
    if not sender.paired:
        return Reply([Outbound(UNPAIRED_TAP_TEXT)], private=True)
    question = _question_about(conversation, proposal_id)
    return _answer(binding, conversation, sender, answer, [question] if question else [], tapped=True)


def _question_about(conversation: Conversation, proposal_id: int | None) -> Notice | None:
    """The conversation's question about ``proposal_id``: the open one, else the last one asked (a note asked
    twice has two, the earlier closed), or None when it was never asked here."""
    questions = Notice.objects.filter(conversation=conversation, kind=NoticeKind.QUESTION, proposal_id=proposal_id)
    return (questions.filter(closed_at__isnull=True).order_by("-created_at", "-id").first()
            or questions.order_by("-created_at", "-id").first())


def _question_to_answer(binding: Binding, conversation: Conversation, sender: Sender,
                        reply_to: str = "") -> Notice | None:
    """The question ``sender``'s typed yes/no answers, or None (then the message is an ordinary one).

    A reply to a question's message (``reply_to``) answers that question and no other: one decided, expired
    or dropped meanwhile is answered with what became of it, and one this sender may not answer with why
    (``_answer``). Otherwise it is the open question the bot asked for last (asked, or named as still
    waiting; of those at once the most recent) that this sender may answer
    (``proposal_may_answer``, the memory app's rule) while it is still the bot's last word to them: once the
    model answered a message of theirs since the bot asked ("Want a recipe?"), their plain yes answers that,
    not a question that may wait 24 hours, and it goes to the model; the question waits in the web inbox, and
    a reply to its message or a tap on its buttons still answers it. Questions whose proposal was decided meanwhile
    elsewhere (the web inbox, the expiry sweep) are closed first, and one dropped unannounced (its agent
    deleted, a forget) is answered once with why nothing was saved. A question past its 24 hours but not yet
    swept still counts: the answer says it expired."""
    if reply_to:
        replied = _question_replied_to(binding, conversation, reply_to)
        if replied is not None:
            return replied
    # The one the bot asked for last first: a "still waits" line after a turn that asked about another note
    # names the earlier one last ("reply yes to save it"); among those asked at once, the most recent.
    notices = list(_open_questions(conversation).order_by(Coalesce("asked_at", "created_at").desc(), "-created_at",
                                                          "-id"))
    proposals = Proposal.objects.in_bulk([notice.proposal_id for notice in notices])
    turn_sender = _turn_sender(sender)
    spoke_at = sender_spoke_at(owner_id=binding.owner_id, binding_id=binding.pk,
                               conversation_key=conversation.channel_key, sender_id=sender.pk) if notices else None

    def asked_last(notice: Notice) -> bool:  # the bot has not answered this sender since it asked
        return spoke_at is None or spoke_at <= _asked_at(notice)

    chosen: Notice | None = None
    untold: Notice | None = None  # dropped with its agent or by a forget: nobody here was told yet
    for notice in notices:
        proposal = proposals.get(notice.proposal_id)
        if proposal is None or proposal.owner_id != binding.owner_id or proposal.status != Proposal.Status.PENDING:
            if untold is None and proposal is not None and proposal.owner_id == binding.owner_id \
                    and proposal.status == Proposal.Status.EXPIRED and proposal.decided_by in _DROPPED_UNTOLD \
                    and asked_last(notice):
                untold = notice  # the answer says why nothing was saved (once: the answer closes it)
            else:
                _close(notice)  # once the conversation moved on, an untold one is left to the inbox's list
        elif chosen is None and asked_last(notice) and proposals_services.proposal_may_answer(proposal, turn_sender):
            chosen = notice  # the most recent this sender may answer
    if chosen is not None and untold is not None:
        _close(untold)
    return chosen or untold


def _question_not_theirs(binding: Binding, conversation: Conversation) -> Notice | None:
    """The question a plain yes or no from a sender who may answer none of those here plausibly answers
    (``_question_to_answer`` found none, and closed the decided ones): the conversation's most recent open
    question that still waits, while it is the last thing the bot said here (the model has not answered
    since it was asked). Their answer is refused by the store with the policy's reason, which ``_answer``
    tells them, as it tells a reply to the question's own message; otherwise their "yes" would go to the
    model, and they would take the note as confirmed. Once the model has said something since ("Want a
    recipe?"), their yes answers that, not a question that may wait 24 hours: it goes to the model, or they
    could never say yes to it. (A sender who may answer confirms the most recent question with a plain yes
    while the bot has not answered them since it asked, or named it again as waiting, within its 24 hours.)"""
    for notice in _open_questions(conversation).order_by("-created_at", "-id"):
        if Proposal.objects.filter(pk=notice.proposal_id or 0, owner_id=binding.owner_id,
                                   status=Proposal.Status.PENDING).exists():
            asked_last = not answered_since(
                owner_id=binding.owner_id, binding_id=binding.pk, conversation_key=conversation.channel_key,
                since=_asked_at(notice))
            return notice if asked_last else None
    return None


def _question_replied_to(binding: Binding, conversation: Conversation, reply_to: str) -> Notice | None:
    """The question whose message ``reply_to`` names (open or not), or None when it names none (a reply to
    another message of the bot's). Several questions can share one (on Slack, those asked in one thread):
    the most recent that still waits, else the most recent. A question asked again stays one proposal: its
    open question is the one answered."""
    notices = list(Notice.objects.filter(conversation=conversation, kind=NoticeKind.QUESTION, message_ref=reply_to)
                   .order_by("-created_at", "-id"))
    proposals = Proposal.objects.filter(owner_id=binding.owner_id).in_bulk([n.proposal_id for n in notices])
    for notice in notices:
        proposal = proposals.get(notice.proposal_id)
        if proposal is not None and proposal.status == Proposal.Status.PENDING:
            return _question_about(conversation, proposal.pk) or notice
    return notices[0] if notices else None


#: Suggestions dropped without an announcement in the chat (their agent deleted, everything forgotten, their
#: chat deleted by the owner): the first yes or no after it is told what became of it, as a question answered
#: in the inbox or expired (which the chat was told of) is not.
_DROPPED_UNTOLD = frozenset({proposals_services.AGENT_DELETED, proposals_services.FORGOTTEN,
                             proposals_services.CHAT_DELETED, proposals_services.ADMIN_EXPIRED})


#: Each way a suggestion is dropped before its time, by the code of the 410 an answer to it gets.
_DROPPED_BY_CODE = {dropped.code: dropped for dropped in proposals_services.DROPPED.values()}


def _still_waiting(binding: Binding, conversation: Conversation, answered: list[Notice]) -> QuerySet[Notice]:
    """The other questions here whose note still waits (``answered``: the ones this answer was for, which are
    not counted even when they stay open, as after a "changed since" refusal). One decided meanwhile in the
    web inbox, or dropped, is not: its question is open until a yes or no here closes it, and a plain yes
    would then go to the model."""
    pending = Proposal.objects.filter(owner_id=binding.owner_id, status=Proposal.Status.PENDING).values("pk")
    return (_open_questions(conversation).exclude(pk__in=[notice.pk for notice in answered])
            .filter(proposal_id__in=pending))


def _still_waiting_text(binding: Binding, conversation: Conversation, answered: list[Notice]) -> str | None:
    """A line saying how many other questions wait here, if any (``_still_waiting``)."""
    waiting = _still_waiting(binding, conversation, answered).count()
    if not waiting:
        return None
    notes = "1 more note waits" if waiting == 1 else f"{waiting} more notes wait"
    return (f"{notes} for an answer here: use the buttons under it, or reply yes or no again to answer the "
            "most recent.")


def _answer(binding: Binding, conversation: Conversation, sender: Sender, answer: Answer,
            notices: list[Notice], *, tapped: bool) -> Reply:
    """A yes or no to the questions ``notices`` (a tapped button's, or the one a typed answer answers)."""
    if not notices:
        text = "That question does not belong to this chat."
        return Reply([], answered=text, settled=True)
    turn_sender = _turn_sender(sender)
    lines: list[str] = []
    outcomes: list[str] = []
    refused = False  # not this sender's to answer: no "reply yes or no again" for the others waiting
    forgets = set(Proposal.objects.filter(owner_id=binding.owner_id, is_delete=True,
                                          pk__in=[n.proposal_id for n in notices]).values_list("pk", flat=True))
    for notice in notices:
        assert notice.proposal_id is not None
        forget = notice.proposal_id in forgets
        try:
            if answer == "yes":
                proposals_services.proposal_confirm(owner_id=binding.owner_id, proposal_id=notice.proposal_id,
                                                    actor=_actor(binding, sender), sender=turn_sender)
                lines.append(f"Forgotten: the note \u201c{notice.topic}\u201d. It waits in the Trash of your Files if "
                             "you want it back." if forget
                             else f"Saved: \u201c{notice.summary}\u201d ({notice.topic}).")
                outcomes.append("Forgotten." if forget else "Saved.")
            else:
                proposals_services.proposal_reject(owner_id=binding.owner_id, proposal_id=notice.proposal_id,
                                                   actor=_actor(binding, sender), sender=turn_sender)
                lines.append(f"Kept: the note \u201c{notice.topic}\u201d. Nothing was forgotten." if forget
                             else f"Dropped: \u201c{notice.summary}\u201d ({notice.topic}). Nothing was saved.")
                outcomes.append("Kept." if forget else "Dropped.")
            _close(notice)
        except Forbidden as exc:
            refused = True
            reason = exc.details.get("reason") if isinstance(exc.details, dict) else None
            lines.append(refusal_text(reason))
            outcomes.append("You cannot confirm this note." if reason in _WHO_MAY_ANSWER or reason is None
                            else "It cannot be confirmed here now.")
        except Gone as exc:
            _close(notice)
            dropped = _DROPPED_BY_CODE.get(exc.code)
            if dropped is not None:  # ended before its time (a forget, its agent deleted…): it did not expire
                lines.append(f"That note was not {'forgotten' if forget else 'saved'}: {exc.message}")
                outcomes.append(dropped.listed)
            else:
                lines.append(EXPIRED_FORGET_TEXT if forget else EXPIRED_TEXT)
                outcomes.append("Expired.")
        except NotFound:
            _close(notice)
            lines.append("That note is gone.")
            outcomes.append("Gone.")
        except Conflict as exc:
            if exc.code == "proposal_decided":
                _close(notice)
                lines.append(_answered_already_text(notice, forget, exc.details))
                outcomes.append("Answered already.")
            else:
                lines.append(f"It could not be saved: {exc.message}")
                outcomes.append("Not saved.")
        except ApplicationError as exc:  # e.g. the conversation's index is full (422)
            lines.append(f"It could not be saved: {exc.message}")
            outcomes.append("Not saved.")
    if not tapped and not refused:
        waiting = _still_waiting_text(binding, conversation, notices)
        if waiting:
            lines.append(waiting)  # "reply yes or no again": the bot's last word asks for the others again
            _asked_again(_still_waiting(binding, conversation, notices))
    unique = list(dict.fromkeys(lines))
    settled = not Notice.objects.filter(pk__in=[n.pk for n in notices], closed_at__isnull=True).exists()
    return Reply([Outbound("\n".join(unique))], answered=" ".join(dict.fromkeys(outcomes)) if tapped else None,
                 settled=settled)


def _answered_already_text(notice: Notice, forget: bool, details: object) -> str:
    """What an answer to a question decided already is told: what became of its note."""
    status = details.get("status") if isinstance(details, dict) else None
    if status == Proposal.Status.CONFIRMED:
        outcome = (f"the note \u201c{notice.topic}\u201d was forgotten." if forget
                   else f"\u201c{notice.summary}\u201d ({notice.topic}) was saved.")
    elif status == Proposal.Status.REJECTED:
        outcome = (f"the note \u201c{notice.topic}\u201d was kept." if forget
                   else f"\u201c{notice.summary}\u201d ({notice.topic}) was dropped.")
    else:
        outcome = f"\u201c{notice.topic}\u201d."
    return f"That question was already answered: {outcome}"


def _undo(binding: Binding, conversation: Conversation, sender: Sender) -> Reply:
    """Take back the conversation's latest automatic note, within its Undo window (checked by the store)."""
    notice = _open_saves(conversation).order_by("-created_at", "-id").first()
    assert notice is not None and notice.change_id is not None
    if notice.sender_id not in (None, sender.pk) and not sender.can_confirm:
        return Reply([Outbound("Only the person the note was saved for, or someone the owner allows to confirm "
                               "changes, can undo it.")])
    try:
        notes_services.change_undo(owner_id=binding.owner_id, change_id=notice.change_id,
                                   actor=_actor(binding, sender), not_after=notice.undo_until)
    except Gone:
        _close(notice)
        return Reply([Outbound(UNDO_CLOSED_TEXT)])
    except Conflict as exc:
        _close(notice)
        if exc.code == "already_undone":
            return Reply([Outbound(f"That note was undone already ({notice.topic}).")])
        return Reply([Outbound(f"It could not be undone here: {exc.message}")])
    except NotFound:
        _close(notice)
        return Reply([Outbound("That note is gone.")])
    _close(notice)
    return Reply([Outbound(f"Undone: \u201c{notice.summary}\u201d ({notice.topic}) is taken back; the earlier "
                           "text is restored.")])


# --------------------------------------------------------------------------------------------------------
# Expiry announcements (the Celery sweep's listener)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Announcement:
    binding_id: int
    conversation_id: str
    outbound: Outbound


def expiry_announcements(proposal: Proposal) -> list[tuple[Notice, Announcement]]:
    """What to post about an expired proposal: one message per open question about it."""
    notices = (Notice.objects.select_related("conversation__binding__owner")
               .filter(kind=NoticeKind.QUESTION, proposal_id=proposal.pk, closed_at__isnull=True))
    result = []
    for notice in notices:
        conversation = notice.conversation
        if proposal.is_delete:
            text = (f"The note \u201c{notice.topic}\u201d was not forgotten: nobody answered within 24 hours. "
                    "Ask again if you still want it forgotten.")
        else:
            text = (f"The note \u201c{notice.summary}\u201d ({notice.topic}) was not saved: nobody answered within "
                    "24 hours. Ask again if you still want it saved.")
        result.append((notice, Announcement(conversation.binding_id, conversation.external_id, Outbound(text))))
    return result


def notice_close(notice: Notice) -> None:
    _close(notice)
