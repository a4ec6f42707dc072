"""Telegram: python-telegram-bot handlers that translate updates for the core and send what it answers.

Only translation lives here. A private chat is one-to-one; groups, supergroups and channels are groups;
anything else is unknown. Yes/No buttons are an inline keyboard (``memory:<yes|no>:<proposal id>``). The
Bot API address comes from ``TELEGRAM_API_BASE_URL``. One ``Application`` per event loop (the library's
rule): the runner and the expiry announcement build their own; the webhook view's are kept, initialized, on
one event loop of the web process (``WebhookBots``), so an update costs no getMe. Updates of different
chats are handled side by side (a turn can wait a minute for the model); one chat's are handled in order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from telegram import Bot, BotCommand, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import (
    Application,
    BaseUpdateProcessor,
    CallbackQueryHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from bridges import core, pending, services
from bridges.runtime import REVOKED_REASON, Revoked, Transient, run_sync, typing, with_retries

log = logging.getLogger(__name__)

CALLBACK_RE = re.compile(r"^memory:(yes|no):(\d{1,18})\Z")


def api_urls() -> tuple[str, str]:
    base = settings.TELEGRAM_API_BASE_URL.rstrip("/")
    return f"{base}/bot", f"{base}/file/bot"


def classify(exc: BaseException) -> BaseException | None:
    """Revoked for a refused token; Transient for rate limits, 5xx and the network; None otherwise."""
    if isinstance(exc, InvalidToken):
        return Revoked(REVOKED_REASON.format(platform="Telegram"), code="token_revoked")
    if isinstance(exc, RetryAfter):
        return Transient(str(exc), retry_after=exc._retry_after.total_seconds())
    if isinstance(exc, BadRequest | Forbidden):
        return None  # the message itself is wrong, or the person blocked the bot: retrying cannot help
    if isinstance(exc, NetworkError):  # 5xx, timeouts, connection errors
        return Transient(str(exc))
    return None


#: Telegram shows a chat action for 5 seconds (or until the bot's next message): sent again every 4.
TYPING_SECONDS = 4.0

#: The most updates one bot handles at the same time (each waits for the model in a worker thread).
MAX_CONCURRENT_UPDATES = 32


class ChatOrderedUpdates(BaseUpdateProcessor):
    """Updates of different chats run side by side; one chat's messages run one after another in the order
    they came, and so do its button taps (apart from its messages: a tap answers a question already asked,
    and must not wait behind a slow turn until Telegram no longer takes its answer)."""

    def __init__(self, max_concurrent_updates: int = MAX_CONCURRENT_UPDATES) -> None:
        # The library's semaphore is taken before do_process_update, so an update waiting for its chat would
        # hold a slot: 32 messages of one busy group would stop every other chat. Its limit is set out of
        # reach; the real one is taken once the chat's turn has come.
        super().__init__(1 << 20)
        self._running = asyncio.Semaphore(max_concurrent_updates)
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._users: dict[tuple[str, int], int] = {}

    @staticmethod
    def _key(update: object) -> tuple[str, int] | None:
        if not isinstance(update, Update) or update.effective_chat is None:
            return None
        return ("tap" if update.callback_query else "message", update.effective_chat.id)

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        key = self._key(update)
        if key is None:
            async with self._running:
                await coroutine
            return
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock, self._running:  # asyncio's locks are fair: waiters get it in the order they asked
                await coroutine
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to free."""


#: The updates ``on_message`` handles: every message a person writes (a photo or file too: its caption is its
#: text); not the service messages about members, titles and pins.
MESSAGES = filters.UpdateType.MESSAGE & ~filters.StatusUpdate.ALL


def build_application(binding_id: int, token: str) -> Application:
    """The bot of one binding: handlers for text messages and Yes/No taps, and an error handler."""
    base_url, file_url = api_urls()
    app = (Application.builder().token(token).base_url(base_url).base_file_url(file_url).updater(None)
           .concurrent_updates(ChatOrderedUpdates()).build())
    app.bot_data["binding_id"] = binding_id
    app.bot_data["kept"] = {}  # update id -> its PendingReply, written down as it arrived (``keep``)
    app.add_handler(MessageHandler(MESSAGES, on_message))
    app.add_handler(CallbackQueryHandler(on_button, pattern=CALLBACK_RE))
    app.add_error_handler(on_error)
    return app


# --------------------------------------------------------------------------------------------------------
# Translation
# --------------------------------------------------------------------------------------------------------


def _kind(chat_type: str | None) -> core.Kind:
    if chat_type == "private":
        return "one_to_one"
    if chat_type in ("group", "supergroup", "channel"):
        return "group"
    return "unknown"


def to_inbound(update: Update, *, binding_id: int, bot_id: int, bot_username: str) -> core.InboundMessage | None:
    """The core's view of a message (a photo's or a file's caption as its text; one with no text at all as
    unreadable), or None for anything else."""
    message = update.effective_message
    chat = update.effective_chat
    user = update.effective_user
    if message is None or chat is None or user is None or user.is_bot:
        return None
    text = message.text if message.text is not None else (message.caption or "")
    mention = f"@{bot_username}" if bot_username else None
    replied_to_bot = bool(message.reply_to_message and message.reply_to_message.from_user
                          and message.reply_to_message.from_user.id == bot_id)
    # A command names its bot in a group (/remember@name); one that names another bot is not for this one.
    command_for = re.match(r"/\w+@(\w+)", text)
    if command_for and bot_username and command_for.group(1).lower() != bot_username.lower():
        return None
    addressed = chat.type == "private" or replied_to_bot or text.startswith("/") or bool(
        mention and mention.lower() in text.lower())
    if mention:
        text = re.sub(re.escape(mention), "", text, flags=re.IGNORECASE).strip()
    return core.InboundMessage(
        binding_id=binding_id, conversation_id=str(chat.id), kind=_kind(chat.type), sender_id=str(user.id),
        sender_display=user.full_name or user.username or str(user.id), text=text,
        delivery_key=f"update:{update.update_id}", conversation_title=chat.title or chat.full_name or "",
        addressed=addressed, unreadable=not text and message.text is None,  # "@bot" alone is a text
        reply_to=str(message.reply_to_message.message_id) if replied_to_bot and message.reply_to_message else "")


def markup(outbound: core.Outbound) -> InlineKeyboardMarkup | None:
    if not outbound.buttons:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(button.label,
                                                       callback_data=f"memory:{button.answer}:{button.proposal_id}")
                                  for button in outbound.buttons]])


#: Telegram refuses a message longer than this, counted in UTF-16 code units.
MESSAGE_LIMIT = 4096


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


#: An ``@`` that Telegram reads as the start of a mention: one followed by a username's character and not right
#: after one (so not an e-mail address's ``@``, which Telegram never makes a mention of).
_MENTION_RE = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9_])")
#: A link Telegram surely makes of a web address written out in full (``https://mastodon.social/@bob/1``), up
#: to its first character off the safe list: a mention inside a link is no mention (Telegram's entities never
#: overlap, and the link, starting first, wins), and a word joiner there would end the link at its ``@``. Only
#: a plain ASCII host after ``http(s)://`` at the start of a line or after a space, which Telegram links
#: whatever its top-level domain (but ``teiegram.org``, a look-alike it refuses to link); any other ``@``
#: gets its word joiner.
_LINK_RE = re.compile(r"(?<![^ \n])https?://(?!teiegram\.org/)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
                      r"[a-z]{2,63}/[a-z0-9._~%/+=&?#:@!$*,;-]*", re.IGNORECASE)
#: U+2060 WORD JOINER: no width, no break, and not a username's character, so ``@\u2060name`` reads as
#: ``@name`` but is no mention.
WORD_JOINER = "\u2060"


def unmentioned(text: str) -> str:
    """``text`` as it reads, with a word joiner after each ``@`` that Telegram would make a mention of."""
    links = [link.span() for link in _LINK_RE.finditer(text)]

    def joined(at: re.Match[str]) -> str:
        return "@" if any(start < at.start() < end for start, end in links) else "@" + WORD_JOINER

    return _MENTION_RE.sub(joined, text)


def shown(outbound: core.Outbound) -> str:
    """The text to send for ``outbound``. It always goes as plain text (no parse mode), but Telegram still makes
    every ``@username`` in it a mention, which notifies that person in a group: in the bot's own words (a
    question, "Saved", the notes listing, an Undo, a notice quoting a note or what someone said) and in the
    model's answer alike (a careless or prompt-injected answer must not ping a member, as on Slack and
    Discord), each such ``@`` gets a word joiner after it, so the text reads the same and pings nobody. An
    e-mail address and a link stay as they are."""
    return unmentioned(outbound.text)


def _shown_length(text: str) -> int:
    return utf16_length(unmentioned(text))


async def send(bot: Bot, chat_id: int | str, outbound: core.Outbound, *, reply_to: int | None = None) -> int | None:
    """Send one message, retrying rate limits and 5xx with backoff; Revoked when the token is refused. A text
    over Telegram's limit goes as several messages (the buttons under the last); a part that fails does not
    keep back the parts after it, and the first failure is raised once all were tried. Returns the id of the
    last part's message (the one with the buttons)."""
    failure: TelegramError | None = None
    sent_id: int | None = None
    for part in outbound.parts(MESSAGE_LIMIT, _shown_length):
        async def call(part: core.Outbound = part) -> Any:
            return await bot.send_message(chat_id=chat_id, text=shown(part), reply_markup=markup(part),
                                          reply_to_message_id=reply_to)

        try:
            sent = await with_retries(call, classify, what=f"telegram sendMessage to {chat_id}")
            sent_id = getattr(sent, "message_id", None)
        except InvalidToken:
            raise
        except TelegramError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return sent_id


async def send_all(bot: Bot, chat_id: int | str, outbounds: list[core.Outbound], *,
                   reply_to: int | None = None, binding_id: int | None = None) -> None:
    """Send the core's messages in order; one that fails is logged and does not keep back the ones after
    it (a refused token still stops everything). A question's message id is recorded (``binding_id``), so a
    reply to it answers that question."""
    for outbound in outbounds:
        try:
            sent_id = await send(bot, chat_id, outbound, reply_to=reply_to)
            if binding_id is not None and sent_id is not None and outbound.buttons:
                await run_sync(core.question_sent, binding_id=binding_id, conversation_id=str(chat_id),
                               proposal_id=outbound.buttons[0].proposal_id, message_ref=str(sent_id))
        except TelegramError as exc:
            if isinstance(exc, InvalidToken):
                raise
            log.warning("telegram: a message to %s could not be sent", chat_id, exc_info=True)


# --------------------------------------------------------------------------------------------------------
# Handlers
# --------------------------------------------------------------------------------------------------------


async def on_message(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Passes a message to the core and sends its replies in the same chat."""
    binding_id = context.bot_data["binding_id"]
    inbound = to_inbound(update, binding_id=binding_id, bot_id=context.bot.id, bot_username=context.bot.username)
    if inbound is None:
        return
    chat = update.effective_chat
    assert chat is not None
    # "typing…" while the turn runs (the model can take a minute), for a message the bot answers.
    kept = context.bot_data["kept"].get(update.update_id)
    async with typing(lambda: context.bot.send_chat_action(chat_id=chat.id, action=ChatAction.TYPING),
                      every=TYPING_SECONDS, what=f"telegram binding {binding_id}", show=inbound.addressed):
        reply, pending_id = await run_sync(pending.answer, inbound, pending_id=kept)
    group = chat.type != "private"
    message_id = update.effective_message.message_id if update.effective_message and group else None
    await send_all(context.bot, chat.id, reply.messages, reply_to=message_id, binding_id=binding_id)
    if pending_id is not None:
        await run_sync(pending.sent, pending_id)


#: How long the answer to a tap waits for the tap's outcome, which it then shows (the only place Telegram shows
#: something to the tapper alone). A slower outcome does not keep the spinner going, and Telegram refuses an
#: answer that comes too late: the spinner stops, and the outcome follows as a message.
TAP_ANSWER_SECONDS = 3.0
#: Telegram shows at most this many characters in the answer to a tap.
TAP_ANSWER_LIMIT = 200


async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Answers a Yes/No tap: confirms or drops the proposal, then clears the buttons of the question."""
    query = update.callback_query
    assert query is not None and query.data is not None
    match = CALLBACK_RE.match(query.data)
    chat = update.effective_chat
    if match is None or chat is None or query.from_user is None:
        await _answer_query(query)
        return
    user = query.from_user
    inbound = core.InboundMessage(
        binding_id=context.bot_data["binding_id"], conversation_id=str(chat.id), kind=_kind(chat.type),
        sender_id=str(user.id), sender_display=user.full_name or user.username or str(user.id),
        delivery_key=f"update:{update.update_id}", conversation_title=chat.title or chat.full_name or "",
        answer=match.group(1), proposal_id=int(match.group(2)))  # type: ignore[arg-type]
    handling = asyncio.ensure_future(run_sync(core.handle, inbound))
    try:
        reply = await asyncio.wait_for(asyncio.shield(handling), TAP_ANSWER_SECONDS)
    except TimeoutError:
        await _answer_query(query)
        reply = await handling
        if reply.private:  # meant for the tapper alone, and too late for the only place that shows it so
            log.info("telegram: the answer to a tap came too late to show it to the tapper alone")
            return
    except Exception:
        await _answer_query(query)
        raise
    else:
        said = "\n".join(outbound.text for outbound in reply.messages) if reply.private else reply.answered or ""
        await _answer_query(query, said[:TAP_ANSWER_LIMIT])
    if reply.duplicate or reply.private:
        return
    if reply.settled:
        try:
            await query.edit_message_reply_markup(reply_markup=None)
        except BadRequest:  # the question was edited already
            pass
    messages = reply.messages or ([core.Outbound(reply.answered)] if reply.answered else [])
    await send_all(context.bot, chat.id, messages)


async def _answer_query(query: CallbackQuery, text: str = "") -> None:
    """Stop the tapped button's spinner, showing ``text`` to the tapper alone when there is one; a failure (too
    late, a network error) is logged, never raised."""
    try:
        await with_retries(lambda: query.answer(text=text or None), classify, what="telegram answerCallbackQuery")
    except InvalidToken:
        raise
    except TelegramError:
        log.warning("telegram: a button tap could not be answered", exc_info=True)


async def on_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Logs a failed update; a refused token turns the binding off with a reason."""
    error = context.error
    binding_id = context.bot_data.get("binding_id")
    if isinstance(error, Revoked | InvalidToken) and binding_id is not None:
        reason = error.reason if isinstance(error, Revoked) else REVOKED_REASON.format(platform="Telegram")
        await run_sync(services.binding_report_revoked, binding_id=binding_id, code="token_revoked", reason=reason)
        return
    log.error("telegram binding %s: handling an update failed", binding_id, exc_info=error)


async def keep(app: Application, updates: list[Update]) -> None:
    """Write down the messages among ``updates`` the bot will answer (``pending.keep``), as they arrive and in
    one statement, before they wait for their chat's earlier messages or a free turn thread; ``on_message``
    finds each by its update id. ``keep_pending`` says whose: ``runbridges``' or the ``web`` process's."""
    keeping = app.bot_data.get("keep_pending")
    if keeping not in ("runbridges", "web"):
        return
    binding_id = app.bot_data["binding_id"]
    inbounds = [to_inbound(update, binding_id=binding_id, bot_id=app.bot.id, bot_username=app.bot.username)
                if MESSAGES.check_update(update) else None for update in updates]
    for update, pending_id in zip(updates, await pending.keep_soon(inbounds, web=keeping == "web"), strict=True):
        if pending_id is not None:
            app.bot_data["kept"][update.update_id] = pending_id


async def handle(app: Application, update: Update) -> None:
    """Hand a (kept) update to the bot's update processor; once handled, or cut off before its turn started,
    its row is let go (``pending.release``): one whose turn never ran waits for the bot's next start."""
    try:
        await app.update_processor.process_update(update, app.process_update(update))
    finally:
        await pending.release_soon(app.bot_data["kept"].pop(update.update_id, None))


# --------------------------------------------------------------------------------------------------------
# Webhook, polling, sending from outside an update
# --------------------------------------------------------------------------------------------------------


class _WebhookBot:
    """One binding's initialized Application in the web process, and the updates it is handling."""

    def __init__(self, app: Application, key: tuple[str, str]) -> None:
        self.app, self.key = app, key
        self.in_hand = 0
        self.retired = False
        self._ready: asyncio.Future[None] | None = None

    async def ready(self) -> Application:
        """The Application, initialized once (its getMe); a failure (a refused token) is raised to every
        update waiting for it, and the next update tries again with a new bot."""
        if self._ready is None:
            self._ready = asyncio.ensure_future(self.app.initialize())
        await asyncio.shield(self._ready)
        return self.app

    @property
    def failed(self) -> bool:
        """Its initialization failed (or was cut off)."""
        ready = self._ready
        return ready is not None and ready.done() and (ready.cancelled() or ready.exception() is not None)

    async def process(self, payload: dict[str, Any]) -> None:
        app = await self.ready()
        update = Update.de_json(payload, app.bot)
        self.in_hand += 1
        try:
            # Through the bot's update processor, as a poll does: one chat's updates in order, chats side by side.
            await keep(app, [update])
            await handle(app, update)
        finally:
            self.in_hand -= 1
            if self.retired and not self.in_hand:
                await self._shutdown()

    async def retire(self) -> None:
        """Replaced (a new token or API address): shut down once the updates in hand are handled."""
        self.retired = True
        if not self.in_hand:
            await self._shutdown()

    async def _shutdown(self) -> None:
        if self._ready is not None and self._ready.done() and not self.failed:
            try:
                await self.app.shutdown()
            except Exception:  # the bot is gone either way
                log.warning("telegram: shutting down a replaced webhook bot failed", exc_info=True)


class WebhookBots:
    """The webhook bots of this process: one initialized Application per binding, reused for every update.

    python-telegram-bot ties an Application to the event loop it was initialized on, and initializing one
    asks Telegram ``getMe``; building one per request (on a loop per request) cost a getMe per update. So the
    process keeps one event loop in a daemon thread, and each webhook request hands its update to that loop and
    waits for it to be handled. A bot is rebuilt when its token (or the Bot API address) changes; the one it
    replaces finishes the updates it is handling first. Made again after a fork (gunicorn's workers)."""

    #: Turns (database, model) of every webhook bot of the process that may run at once.
    TURN_THREADS = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._bots: dict[int, _WebhookBot] = {}
        self._retiring: set[asyncio.Future[None]] = set()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                loop.set_default_executor(ThreadPoolExecutor(max_workers=self.TURN_THREADS,
                                                             thread_name_prefix="telegram-webhook-turn"))
                threading.Thread(target=loop.run_forever, name="telegram-webhooks", daemon=True).start()
                self._loop, self._pid, self._bots = loop, os.getpid(), {}
            return self._loop

    def process(self, binding_id: int, token: str, payload: dict[str, Any]) -> None:
        """Handle one update that arrived at the webhook view, as a poll would; returns once it was handled
        (Telegram sends it again when the view fails)."""
        future = asyncio.run_coroutine_threadsafe(self._process(binding_id, token, payload), self._running_loop())
        future.result()

    async def _process(self, binding_id: int, token: str, payload: dict[str, Any]) -> None:
        key = (token, settings.TELEGRAM_API_BASE_URL)
        bot = self._bots.get(binding_id)
        if bot is None or bot.key != key:
            if bot is not None:
                retiring = asyncio.ensure_future(bot.retire())
                self._retiring.add(retiring)  # held until done: the loop keeps only a weak reference
                retiring.add_done_callback(self._retiring.discard)
            app = build_application(binding_id, token)
            app.bot_data["keep_pending"] = "web"  # a reply cut off with its process is told by Celery beat
            bot = self._bots[binding_id] = _WebhookBot(app, key)
        try:
            await bot.process(payload)
        except BaseException:
            if self._bots.get(binding_id) is bot and bot.failed:  # it could not start: try anew next time
                del self._bots[binding_id]
            raise


webhook_bots = WebhookBots()


def process_webhook_update(binding_id: int, token: str, payload: dict[str, Any]) -> None:
    """Handle one update that arrived at the webhook view (blocking), with the binding's cached bot."""
    webhook_bots.process(binding_id, token, payload)


def webhook_url(binding_id: int) -> str:
    return f"{settings.PUBLIC_URL.rstrip('/')}/bridges/telegram/{binding_id}/webhook"


async def run(binding_id: int, credentials: dict[str, str], mode: str, stop: asyncio.Event) -> None:
    """Run one Telegram binding until ``stop`` is set: long polling, or registering the webhook and waiting.

    Raises Revoked when the token is refused; other errors propagate to the runner, which backs off."""
    app = build_application(binding_id, credentials["token"])
    app.bot_data["keep_pending"] = "runbridges"  # a reply cut off when runbridges stops is told on its start
    try:
        async with app:
            identity = f"@{app.bot.username}"
            await _offer_commands(app, binding_id)
            if mode == "webhook":
                await with_retries(lambda: app.bot.set_webhook(
                    url=webhook_url(binding_id), secret_token=credentials["webhook_secret"],
                    allowed_updates=["message", "callback_query"]), classify, what="telegram setWebhook")
                await run_sync(services.binding_report_connected, binding_id=binding_id, bot_identity=identity)
                await stop.wait()
                return
            await with_retries(lambda: app.bot.delete_webhook(), classify, what="telegram deleteWebhook")
            await run_sync(services.binding_report_connected, binding_id=binding_id, bot_identity=identity)
            await _poll(app, stop)
    except InvalidToken as exc:
        raise Revoked(REVOKED_REASON.format(platform="Telegram")) from exc


#: The commands Telegram lists in its menu when someone types "/" to the bot.
COMMANDS = (("remember", "Save a note yourself: /remember I live in Rome"),
            ("memory", "List this conversation's notes"),
            ("new", "Start a fresh chat; this conversation's notes stay"), ("help", "What this bot does"))


async def _offer_commands(app: Application, binding_id: int) -> None:
    """List the bot's commands in Telegram's menu. A help, never a reason not to run: a failure is logged."""
    try:
        await app.bot.set_my_commands([BotCommand(name, description) for name, description in COMMANDS])
    except InvalidToken:
        raise
    except TelegramError:
        log.warning("telegram binding %s: could not list the bot's commands", binding_id, exc_info=True)


async def _poll(app: Application, stop: asyncio.Event) -> None:
    """Long polling with getUpdates. Each update is handed to the bot's update processor at once (chats side
    by side, one chat in order), so the next poll confirms it while it may still be handled; its delivery
    claim keeps a repeat from being handled twice. Once stopped, the updates in hand are finished (the
    runner cancels them when that takes too long)."""
    timeout = int(getattr(settings, "BRIDGES_TELEGRAM_POLL_TIMEOUT", 25))
    offset: int | None = None
    failures = 0
    in_hand: set[asyncio.Task[None]] = set()
    try:
        while not stop.is_set():
            poll = asyncio.ensure_future(app.bot.get_updates(offset=offset, timeout=timeout,
                                                             allowed_updates=["message", "callback_query"]))
            stopped = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({poll, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if poll not in done:
                poll.cancel()
                stopped.cancel()
                return
            stopped.cancel()
            try:
                updates = poll.result()
            except RetryAfter as exc:
                await asyncio.sleep(exc._retry_after.total_seconds())
                continue
            except TimedOut:
                continue
            except NetworkError:
                failures += 1
                if failures >= 5:
                    raise
                from bridges.runtime import backoff_seconds

                await asyncio.sleep(backoff_seconds(failures))
                continue
            failures = 0
            # written down before the next poll confirms them to Telegram, which then never sends them again
            await keep(app, list(updates))
            for update in updates:
                offset = update.update_id + 1
                task = asyncio.create_task(handle(app, update), name=f"telegram-update-{update.update_id}")
                in_hand.add(task)
                task.add_done_callback(lambda task: _finished(task, in_hand))
    except asyncio.CancelledError:
        for task in in_hand:
            task.cancel()
        raise
    finally:
        if in_hand:
            await asyncio.gather(*in_hand, return_exceptions=True)


def _finished(task: asyncio.Task[None], in_hand: set[asyncio.Task[None]]) -> None:
    in_hand.discard(task)
    if not task.cancelled() and task.exception() is not None:  # handler errors go to on_error; this is the rest
        log.error("telegram: processing an update failed", exc_info=task.exception())


def send_message(*, binding_id: int, credentials: dict[str, str], conversation_id: str,
                 outbound: core.Outbound) -> None:
    """Post one message from blocking code (the expiry announcement in the Celery worker)."""
    from bridges.runtime import run_blocking

    async def post() -> None:
        base_url, file_url = api_urls()
        bot = Bot(credentials["token"], base_url=base_url, base_file_url=file_url)
        async with bot:
            await send(bot, conversation_id, outbound)

    try:
        run_blocking(post)
    except InvalidToken as exc:
        raise Revoked(REVOKED_REASON.format(platform="Telegram")) from exc
