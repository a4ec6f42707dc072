"""A loopback Telegram Bot API for driving python-telegram-bot (and our bridge) offline.

Serves `/bot<TOKEN>/<method>`: getMe, sendMessage, editMessageText, editMessageReplyMarkup,
answerCallbackQuery, sendChatAction (recorded in `chat_actions`; an unknown action is refused), getUpdates (long poll, bounded by `long_poll_cap`), setWebhook, deleteWebhook,
getWebhookInfo; any other method answers `{"ok": true, "result": true}`. Form-encoded, JSON and multipart
bodies are all understood. Messages the bot sends are recorded in `sent`, every call in `calls`; a plain
text's `@username`s become mention entities as Telegram derives them (`mention_entities`), in the message
answered and in the record's `mentions`.
The module-level builders (`private_message`, `group_message`, `callback_query`) make update payloads the
way Telegram sends them. Faults: `revoke()` (401 on everything), `fail_next(429, retry_after=3)`,
`fail_next(502)`, `fail_next(400, description=...)`, optionally limited to one `method=`. As Telegram does,
a message text that is empty or longer than 4096 (UTF-16 code units) is refused with a 400.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from tests.fakes._loopback import Fault, LoopbackHTTPServer, Request, Response, json_response

BOT_ID = 7000000001
BOT_USERNAME = "memory_test_bot"
DEFAULT_USER_ID = 5550001

_update_ids = itertools.count(100001)
_message_ids = itertools.count(1)
_callback_ids = itertools.count(900001)

_DESCRIPTIONS = {
    400: "Bad Request: chat not found",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    429: "Too Many Requests: retry after {retry_after}",
}


@dataclass
class TelegramCall:
    """One Bot API call as received: the method (as the client spelled it), the token and the parameters."""

    method: str
    token: str
    params: dict[str, Any]


# -- update builders ----------------------------------------------------------------------------------


def _user(user_id: int, first_name: str, username: str | None, language_code: str = "en") -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": user_id,
        "is_bot": False,
        "first_name": first_name,
        "language_code": language_code,
    }
    if username:
        user["username"] = username
    return user


def _entities(text: str) -> list[dict[str, Any]]:
    """The entities Telegram would attach: a leading /command and every @mention."""
    entities = []
    command = re.match(r"/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?", text)
    if command:
        entities.append({"type": "bot_command", "offset": 0, "length": command.end()})
    for mention in re.finditer(r"(?<![\w/])@[A-Za-z0-9_]{3,}", text):
        if command and mention.start() < command.end():
            continue
        entities.append(
            {"type": "mention", "offset": mention.start(), "length": mention.end() - mention.start()}
        )
    return entities


#: A mention as Telegram reads one in a message's plain text: "@" and then 4 to 32 of a username's
#: characters (4: Telegram's collectible usernames), not inside a longer word. Each notifies that user in a
#: group.
MENTION_RE = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9_]{4,32}(?![A-Za-z0-9_])")
#: A link Telegram makes of a web address written out (``https://mastodon.social/@bob``): up to a space, a
#: quote or angle bracket, or a General Punctuation character such as a word joiner. Telegram's entities never
#: overlap, and the link starts first: an ``@username`` inside it is part of the link, no mention.
LINK_RE = re.compile(r"https?://[A-Za-z0-9.-]+\.[A-Za-z]{2,}[/?#][^\s<>\"\u00ab\u00bb\u2000-\u200b\u200e-\u200f\u2016-\u206f]*",
                     re.IGNORECASE)


def mentions(text: str) -> list[re.Match[str]]:
    """The ``@username``s Telegram makes mentions of in a plain ``text``: not those inside a link."""
    links = [link.span() for link in LINK_RE.finditer(text)]
    return [m for m in MENTION_RE.finditer(text) if not any(start < m.start() < end for start, end in links)]


def mention_entities(text: str) -> list[dict[str, Any]]:
    """The mention entities Telegram attaches to a message the bot sends as plain text (no parse mode),
    offsets and lengths in UTF-16 code units as Telegram counts them."""

    def units(part: str) -> int:
        return len(part.encode("utf-16-le")) // 2

    return [{"type": "mention", "offset": units(text[:m.start()]), "length": units(m.group())}
            for m in mentions(text)]


def _message(
    text: str,
    *,
    chat: dict[str, Any],
    sender: dict[str, Any],
    message_id: int | None,
    date: int | None,
    reply_to: dict[str, Any] | None,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "message_id": message_id if message_id is not None else next(_message_ids),
        "from": sender,
        "chat": chat,
        "date": date if date is not None else int(time.time()),
        "text": text,
    }
    entities = _entities(text)
    if entities:
        message["entities"] = entities
    if reply_to is not None:
        message["reply_to_message"] = reply_to
    return message


def private_message(
    text: str,
    *,
    user_id: int = DEFAULT_USER_ID,
    first_name: str = "Alice",
    username: str | None = "alice",
    message_id: int | None = None,
    update_id: int | None = None,
    date: int | None = None,
    reply_to: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An update with a text message in a one-to-one chat (chat id = user id, type "private")."""
    sender = _user(user_id, first_name, username)
    chat = {
        "id": user_id,
        "type": "private",
        "first_name": first_name,
        **({"username": username} if username else {}),
    }
    return {
        "update_id": update_id if update_id is not None else next(_update_ids),
        "message": _message(
            text, chat=chat, sender=sender, message_id=message_id, date=date, reply_to=reply_to
        ),
    }


def group_message(
    text: str,
    *,
    chat_id: int = -1001234567890,
    title: str = "Team",
    chat_type: str = "supergroup",
    user_id: int = DEFAULT_USER_ID,
    first_name: str = "Alice",
    username: str | None = "alice",
    message_id: int | None = None,
    update_id: int | None = None,
    date: int | None = None,
    reply_to: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An update with a text message in a group; write "@memory_test_bot" in `text` to mention the bot."""
    sender = _user(user_id, first_name, username)
    chat = {"id": chat_id, "type": chat_type, "title": title}
    return {
        "update_id": update_id if update_id is not None else next(_update_ids),
        "message": _message(
            text, chat=chat, sender=sender, message_id=message_id, date=date, reply_to=reply_to
        ),
    }


def with_photo(update: dict[str, Any], caption: str = "") -> dict[str, Any]:
    """`update` (from `private_message`/`group_message`) as a photo with `caption` instead of its text, as
    Telegram sends one: the sizes in `photo`, the text and its entities as `caption`/`caption_entities`."""
    message = update["message"]
    message.pop("text", None)
    message.pop("entities", None)
    unique = next(_message_ids)
    message["photo"] = [
        {"file_id": f"AgACAgQ-{unique}-{size}", "file_unique_id": f"AQAD{unique}{size}", "width": size,
         "height": size * 3 // 4, "file_size": size * 40}
        for size in (90, 320, 800)
    ]
    if caption:
        message["caption"] = caption
        caption_entities = _entities(caption)
        if caption_entities:
            message["caption_entities"] = caption_entities
    return update


def callback_query(
    data: str,
    *,
    user_id: int = DEFAULT_USER_ID,
    first_name: str = "Alice",
    username: str | None = "alice",
    chat_id: int | None = None,
    chat_type: str = "private",
    message_id: int = 1,
    message_text: str = "Save this note?",
    reply_markup: dict[str, Any] | None = None,
    query_id: str | None = None,
    update_id: int | None = None,
) -> dict[str, Any]:
    """An update for a tap on an inline keyboard button whose callback_data is `data`.

    The query is attached to the bot's message `message_id` in `chat_id` (default: the user's private chat).
    """
    sender = _user(user_id, first_name, username)
    chat_id = user_id if chat_id is None else chat_id
    chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
    if chat_type == "private":
        chat["first_name"] = first_name
    else:
        chat["title"] = "Team"
    bot = {"id": BOT_ID, "is_bot": True, "first_name": "Memory", "username": BOT_USERNAME}
    message: dict[str, Any] = {
        "message_id": message_id,
        "from": bot,
        "chat": chat,
        "date": int(time.time()),
        "text": message_text,
    }
    if reply_markup is not None:
        message["reply_markup"] = reply_markup
    return {
        "update_id": update_id if update_id is not None else next(_update_ids),
        "callback_query": {
            "id": query_id if query_id is not None else str(next(_callback_ids)),
            "from": sender,
            "chat_instance": f"ci{chat_id}",
            "message": message,
            "data": data,
        },
    }


# -- server -------------------------------------------------------------------------------------------


def _decode(value: Any) -> Any:
    """Form fields carry JSON for objects and arrays (reply_markup, entities) and text for the rest."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _chat_id(value: Any) -> int | str:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value  # an int already (JSON body) or "@channelusername"


class TelegramServer(LoopbackHTTPServer):
    """Telegram Bot API on 127.0.0.1. Give python-telegram-bot `base_url=server.url`,
    `base_file_url=server.file_url`."""

    def __init__(
        self,
        *,
        bot_username: str = BOT_USERNAME,
        bot_id: int = BOT_ID,
        long_poll_cap: float = 0.5,
        latency_ms: int = 0,
    ) -> None:
        super().__init__(latency_ms=latency_ms)
        self.bot = {
            "id": bot_id,
            "is_bot": True,
            "first_name": "Memory",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        self.long_poll_cap = long_poll_cap
        self.revoked = False
        self.calls: list[TelegramCall] = []
        self.sent: list[
            dict[str, Any]
        ] = []  # sendMessage / edits: {method, chat_id, text, reply_markup, ...}
        self.webhook: dict[str, Any] = {"url": ""}
        self.chat_actions: list[tuple[int | str, str]] = []  # (chat id, action) of each sendChatAction
        self._updates: list[dict[str, Any]] = []
        self._message_ids = itertools.count(5001)

    @property
    def url(self) -> str:
        """The Bot API base URL without the token, e.g. for `ApplicationBuilder().base_url(...)`."""
        return f"{self.origin}/bot"

    @property
    def file_url(self) -> str:
        return f"{self.origin}/file/bot"

    # -- test helpers ---------------------------------------------------------------------------------

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue an update for getUpdates (a builder's payload; an update_id is added when missing)."""
        with self._cond:
            update.setdefault("update_id", next(_update_ids))
            self._updates.append(update)
            self._cond.notify_all()
        return update

    def revoke(self) -> None:
        """From now on every call answers 401 Unauthorized, as for a token revoked in BotFather."""
        with self._cond:
            self.revoked = True

    def sent_texts(self, chat_id: int | str | None = None) -> list[str]:
        """Texts the bot sent or edited, optionally only in one chat."""
        with self._cond:
            return [s["text"] for s in self.sent if chat_id is None or s["chat_id"] == chat_id]

    def calls_to(self, method: str) -> list[TelegramCall]:
        with self._cond:
            return [c for c in self.calls if c.method.lower() == method.lower()]

    def wait_for_sent(self, count: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait until at least `count` messages were sent or edited; returns `sent`."""
        self.wait_for(lambda: len(self.sent) >= count, timeout, f"expected {count} sent messages")
        return self.sent

    # -- HTTP -----------------------------------------------------------------------------------------

    def fault_matches(self, fault: Fault, request: Request) -> bool:
        method = fault.options.get("method")
        if method is not None and request.path.rsplit("/", 1)[-1].lower() != method.lower():
            return False
        return super().fault_matches(fault, request)

    def error_response(self, fault: Fault, request: Request) -> Response:
        status = int(fault.kind)
        if status in (500, 502, 503, 504):
            return Response(
                status=status,
                body=b"<html><body>Bad Gateway</body></html>",
                headers={"Content-Type": "text/html"},
            )
        retry_after = int(fault.options.get("retry_after", 3))
        description = fault.options.get("description") or _DESCRIPTIONS.get(status, f"Error {status}")
        payload: dict[str, Any] = {
            "ok": False,
            "error_code": status,
            "description": description.format(retry_after=retry_after),
        }
        if status == 429:
            payload["parameters"] = {"retry_after": retry_after}
        return json_response(payload, status=status)

    def handle(self, request: Request) -> Response:
        match = re.fullmatch(r"/bot([^/]+)/(\w+)", request.path)
        if match is None:
            return json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        token, method = match.groups()
        params = {key: _decode(value) for key, value in request.params.items()}
        self.calls.append(TelegramCall(method=method, token=token, params=params))
        if self.revoked:
            return json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        refusal = self._refusal(method.lower(), params)
        if refusal is not None:
            return json_response({"ok": False, "error_code": 400, "description": refusal}, status=400)
        handler = getattr(self, f"_api_{method.lower()}", None)
        result = handler(params) if handler else True
        return json_response({"ok": True, "result": result})

    # -- methods --------------------------------------------------------------------------------------

    #: Telegram's limit of a message text, in UTF-16 code units.
    MESSAGE_LIMIT = 4096

    def _refusal(self, method: str, params: dict[str, Any]) -> str | None:
        """What Telegram answers (400) to a call it does not take: a chat action without a chat or of an action
        it does not know, a text that is empty or longer than 4096."""
        if method == "sendchataction":
            if not params.get("chat_id"):
                return "Bad Request: chat_id is empty"
            if params.get("action") not in self.CHAT_ACTIONS:
                return "Bad Request: wrong parameter action in request"
            return None
        if method not in ("sendmessage", "editmessagetext"):
            return None
        text = str(params.get("text", ""))
        if not text.strip():
            return "Bad Request: message text is empty"
        if len(text.encode("utf-16-le")) // 2 > self.MESSAGE_LIMIT:
            return "Bad Request: message is too long"
        return None

    def _chat(self, chat_id: int | str) -> dict[str, Any]:
        if isinstance(chat_id, str):
            return {
                "id": -1009999999999,
                "type": "channel",
                "title": chat_id.lstrip("@"),
                "username": chat_id[1:],
            }
        if chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": "User"}
        return {
            "id": chat_id,
            "type": "supergroup" if str(chat_id).startswith("-100") else "group",
            "title": "Team",
        }

    def _bot_message(
        self, chat_id: int | str, text: str, markup: Any, message_id: int | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": message_id if message_id is not None else next(self._message_ids),
            "from": {k: self.bot[k] for k in ("id", "is_bot", "first_name", "username")},
            "chat": self._chat(chat_id),
            "date": int(time.time()),
            "text": text,
        }
        entities = mention_entities(text)
        if entities:
            message["entities"] = entities
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        return message

    def _record(self, method: str, params: dict[str, Any], message: dict[str, Any]) -> None:
        self.sent.append(
            {
                "method": method,
                "chat_id": _chat_id(params.get("chat_id")),
                "text": params.get("text", message.get("text")),
                "reply_markup": params.get("reply_markup"),
                "message_id": message["message_id"],
                "params": params,
                # what Telegram made a mention of (a plain text's @username): each one notifies that person
                "mentions": [] if params.get("parse_mode") else [
                    m.group() for m in mentions(str(message.get("text") or ""))],
            }
        )

    def _api_getme(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.bot

    def _api_sendmessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = _chat_id(params.get("chat_id"))
        message = self._bot_message(chat_id, str(params.get("text", "")), params.get("reply_markup"))
        self._record("sendMessage", params, message)
        return message

    def _api_editmessagetext(self, params: dict[str, Any]) -> dict[str, Any] | bool:
        if "inline_message_id" in params:
            self.sent.append(
                {
                    "method": "editMessageText",
                    "chat_id": None,
                    "text": params.get("text"),
                    "reply_markup": params.get("reply_markup"),
                    "message_id": None,
                    "params": params,
                }
            )
            return True
        chat_id = _chat_id(params.get("chat_id"))
        message = self._bot_message(
            chat_id,
            str(params.get("text", "")),
            params.get("reply_markup"),
            message_id=int(params.get("message_id", 0)),
        )
        self._record("editMessageText", params, message)
        return message

    def _api_editmessagereplymarkup(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = _chat_id(params.get("chat_id"))
        message = self._bot_message(
            chat_id, "", params.get("reply_markup"), message_id=int(params.get("message_id", 0))
        )
        self._record("editMessageReplyMarkup", params, message)
        return message

    #: The actions sendChatAction takes.
    CHAT_ACTIONS = frozenset({"typing", "upload_photo", "record_video", "upload_video", "record_voice",
                              "upload_voice", "upload_document", "choose_sticker", "find_location",
                              "record_video_note", "upload_video_note"})

    def _api_sendchataction(self, params: dict[str, Any]) -> bool:
        self.chat_actions.append((_chat_id(params.get("chat_id")), str(params.get("action"))))
        return True

    def _api_getupdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = min(float(params.get("timeout") or 0), self.long_poll_cap)
        # As Telegram does, an offset confirms (forgets) every earlier update.
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        if not self._updates and timeout > 0:
            self._cond.wait_for(lambda: bool(self._updates) or self._stopping.is_set(), timeout=timeout)
        return sorted(self._updates, key=lambda u: u["update_id"])[:limit]

    def _api_setwebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = {
            "url": params.get("url", ""),
            "secret_token": params.get("secret_token"),
            "allowed_updates": params.get("allowed_updates"),
        }
        return True

    def _api_deletewebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = {"url": ""}
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            self._updates.clear()
        return True

    def _api_getwebhookinfo(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self.webhook.get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
