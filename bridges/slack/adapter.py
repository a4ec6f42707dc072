"""Slack: a slack-bolt App per binding whose listeners translate events for the core and post its replies.

Only translation lives here. ``channel_type`` ``im`` is one-to-one; ``mpim``, ``channel`` and ``group`` are
groups; anything else is unknown. Yes/No are Block Kit buttons (``memory_yes`` / ``memory_no``, the value is
the proposal id). Events arrive over Socket Mode (runbridges) or the Events API (``bridges.views``); Bolt
verifies the signature of the latter. The Web API address comes from ``SLACK_API_BASE_URL``. No "typing…"
while the model answers: Slack gives bots no typing indicator over the Events API or Socket Mode (the RTM
API's is retired; ``assistant.threads.setStatus`` is for AI-assistant apps' threads only).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.error import URLError

from django.conf import settings
from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bridges import core, pending, services
from bridges.runtime import (
    REVOKED_REASON,
    InFlight,
    Revoked,
    Transient,
    _closing,
    run_sync,
    with_retries_sync,
)

log = logging.getLogger(__name__)

#: Errors of the Web API that mean the token no longer works.
REVOKED_ERRORS = {"invalid_auth", "token_revoked", "account_inactive", "not_authed", "token_expired",
                  "app_uninstalled"}
ACTION_RE = re.compile(r"^memory_(yes|no)\Z")


def classify(exc: BaseException) -> BaseException | None:
    if isinstance(exc, SlackApiError):
        response = exc.response
        error = response.get("error") if hasattr(response, "get") else None
        if error in REVOKED_ERRORS:
            return Revoked(REVOKED_REASON.format(platform="Slack"), code=str(error))
        status = getattr(response, "status_code", 200)
        if status == 429 or error == "ratelimited":
            headers = {k.lower(): v for k, v in (getattr(response, "headers", None) or {}).items()}
            raw = headers.get("retry-after")
            value = raw[0] if isinstance(raw, list) else raw
            try:
                retry_after = float(value) if value is not None else None
            except ValueError:
                retry_after = None
            return Transient(str(error), retry_after=retry_after)
        if status >= 500:
            return Transient(str(error or status))
        return None
    if isinstance(exc, URLError | ConnectionError | TimeoutError):
        return Transient(str(exc))
    return None


def web_client(token: str) -> WebClient:
    base = settings.SLACK_API_BASE_URL
    return WebClient(token=token, base_url=base if base.endswith("/") else base + "/")


#: The slash commands the bot answers (each must be added in the Slack app's Slash Commands; ``/reset`` is
#: ``/new``'s other name).
SLASH_COMMANDS = ("/remember", "/memory", "/new", "/reset")


#: The message subtypes that are a person writing: a plain message, one with a file (its text is the
#: message), a thread reply also sent to the channel. Edits, deletions, joins and bots' messages are not.
PERSON_SUBTYPES = (None, "file_share", "thread_broadcast")


def build_app(binding_id: int, credentials: dict[str, str], *, process_before_response: bool = False,
              turns: InFlight | None = None, web: bool = False) -> App:
    """The Bolt app of one binding. HTTP mode verifies Slack's signature with the signing secret; Socket
    Mode needs none (the app-level token opens the socket). ``turns`` (runbridges' Socket Mode) counts the
    messages being answered and writes down their replies on the way (``bridges.pending``); ``web`` (the
    Events API) writes them down as the web process's."""
    signing_secret = credentials.get("signing_secret") or ""
    app = App(client=web_client(credentials["bot_token"]), signing_secret=signing_secret,
              request_verification_enabled=bool(signing_secret), token_verification_enabled=False,
              process_before_response=process_before_response)
    names: dict[str, str] = {}
    names_lock = threading.Lock()

    def display_name(client: WebClient, user_id: str) -> str:
        with names_lock:
            if user_id in names:
                return names[user_id]
        try:
            user = client.users_info(user=user_id)["user"]
            profile = user.get("profile") or {}
            name = profile.get("display_name") or user.get("real_name") or user.get("name") or user_id
        except SlackApiError:
            name = ""
        with names_lock:
            names[user_id] = name
        return name

    def message_inbound(event: dict[str, Any], body: dict[str, Any], context: Any,
                        client: WebClient) -> core.InboundMessage | None:
        """The core's view of a person's message (None for edits, deletions, joins, bots' messages)."""
        if event.get("subtype") not in PERSON_SUBTYPES or event.get("bot_id") or not event.get("user"):
            return None
        bot_user_id = context.get("bot_user_id") or ""
        text = event.get("text") or ""
        mention = re.compile(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>") if bot_user_id else None
        channel_type = event.get("channel_type")
        # Said to the bot: a direct message, a mention, or a reply in the thread of one of the bot's messages
        # (its question: "Reply yes to save it").
        in_its_thread = bool(event.get("thread_ts")) and bool(bot_user_id) and event.get("parent_user_id") == bot_user_id
        addressed = channel_type == "im" or bool(mention and mention.search(text)) or in_its_thread
        if mention:
            text = mention.sub("", text).strip()
        return core.InboundMessage(
            binding_id=binding_id, conversation_id=event["channel"], kind=_kind(channel_type),
            sender_id=event["user"], sender_display=display_name(client, event["user"]),
            text=unescape(text, lambda user_id: display_name(client, user_id)),
            delivery_key=f"event:{body.get('event_id') or event.get('client_msg_id') or event.get('ts')}",
            addressed=addressed, unreadable=not text and bool(event.get("files")),
            reply_to=str(event.get("thread_ts")) if in_its_thread else "")

    def keep_message(event: dict[str, Any], body: dict[str, Any], context: Any, client: WebClient,
                     next: Callable[[], Any]) -> None:
        """Writes a message the bot will answer down (``bridges.pending``) as it arrives: before Bolt
        acknowledges it and queues it for one of its listener threads, where it may wait for the turns ahead."""
        if turns is not None or web:
            inbound = context["inbound"] = message_inbound(event, body, context, client)
            [context["kept"]] = _closing(pending.keep)([inbound], web=web)
        next()

    @app.event("message", middleware=[keep_message])
    def on_message(event: dict[str, Any], body: dict[str, Any], context: Any, client: WebClient) -> None:
        """Passes a person's message to the core and posts its replies in the same channel (and thread)."""
        inbound = context["inbound"] if "inbound" in context else message_inbound(event, body, context, client)
        if inbound is None:
            return
        kept = context.get("kept")
        with turns.turn() if turns is not None else contextlib.nullcontext():
            try:
                reply, pending_id = _closing(pending.answer)(inbound, pending_id=kept)
                _post_all(binding_id, client, event["channel"], reply.messages, thread_ts=event.get("thread_ts"))
                if pending_id is not None:
                    _closing(pending.sent)(pending_id)
            finally:
                _closing(pending.release)(kept)

    def on_command(ack: Any, command: dict[str, Any], respond: Any, client: WebClient) -> None:
        """``/remember <fact>``, ``/memory`` and ``/new``: Slack keeps messages that start with a slash for the app whose
        command it is, so these arrive as slash commands (register them in the app's Slash Commands, with the
        Events URL as their Request URL). The core handles each as the message it stands for, in a
        conversation the bot already has; a reply the bot cannot post there is shown to the typist alone."""
        ack()
        channel, user = command.get("channel_id"), command.get("user_id")
        if not channel or not user:
            return
        inbound = core.InboundMessage(
            # A command says nothing reliable about who else is in the channel: the core's "unknown" (a group)
            # unless the conversation is known to be one-to-one already.
            binding_id=binding_id, conversation_id=channel, kind="unknown", sender_id=user,
            sender_display=display_name(client, user),
            text=unescape(f"{command.get('command') or ''} {command.get('text') or ''}".strip(),
                          lambda user_id: display_name(client, user_id)),
            delivery_key=f"command:{command['trigger_id']}" if command.get("trigger_id") else None,
            known_only=True)
        reply = _handle(binding_id, inbound)
        for outbound in reply.messages:
            try:
                _post_or_revoke(binding_id, client, channel, outbound)
            except Revoked:
                raise
            except SlackApiError:
                log.info("slack binding %s: a command answered to its typist only in %s", binding_id, channel)
                for part in outbound.parts(MESSAGE_LIMIT, _escaped_length):
                    _respond(respond, {**_message(part), "response_type": "ephemeral"})

    for name in SLASH_COMMANDS:
        app.command(name)(on_command)

    @app.action(ACTION_RE)
    def on_button(ack: Any, body: dict[str, Any], action: dict[str, Any], respond: Any, client: WebClient) -> None:
        """Answers a Yes/No click: confirms or drops the proposal and replaces the buttons with the outcome."""
        ack()
        match = ACTION_RE.match(action.get("action_id", ""))
        value = str(action.get("value", ""))
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
        user = body.get("user") or {}
        if match is None or not (value.isascii() and value.isdigit()) or not channel or not user.get("id"):
            return
        inbound = core.InboundMessage(
            binding_id=binding_id, conversation_id=channel, kind="unknown", sender_id=user["id"],
            sender_display=display_name(client, user["id"]),
            delivery_key=f"action:{user['id']}:{action.get('action_ts') or body.get('trigger_id')}",
            answer=match.group(1), proposal_id=int(value))  # type: ignore[arg-type]
        reply = _handle(binding_id, inbound)
        if reply.duplicate:
            return
        if reply.private:  # for the clicker alone: an ephemeral message only they see, never a post
            for outbound in reply.messages:
                try:
                    _respond(respond, {**_message(outbound), "response_type": "ephemeral", "replace_original": False})
                except Exception:
                    log.warning("slack binding %s: could not answer a click", binding_id, exc_info=True)
            return
        if reply.settled:
            question = ((body.get("message") or {}).get("text") or "").strip()  # as posted: escaped already
            try:
                _respond(respond, {"text": f"{question}\n{_escape(reply.answered or '')}".strip(), "mrkdwn": False,
                                   "replace_original": True})
            except Exception:
                log.warning("slack binding %s: could not update the question", binding_id, exc_info=True)
        _post_all(binding_id, client, channel, reply.messages)

    @app.error
    def on_error(error: Exception) -> None:
        """Logs a failed listener."""
        log.error("slack binding %s: handling an event failed", binding_id, exc_info=error)

    return app


def _kind(channel_type: str | None) -> core.Kind:
    if channel_type == "im":
        return "one_to_one"
    if channel_type in ("mpim", "channel", "group"):
        return "group"
    return "unknown"


def _handle(binding_id: int, inbound: core.InboundMessage) -> core.Reply:
    return _closing(core.handle)(inbound)


def _escape(text: str) -> str:
    """``text`` for Slack's ``text`` field: ``&``, ``<`` and ``>`` as Slack's docs ask, so nothing in it is
    read as a mention (``<!channel>``, ``<@U123>``) or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _message(outbound: core.Outbound) -> dict[str, Any]:
    """The text fields of one message: always escaped, and the bot's own words (a note's text in them) with
    Slack's formatting off (``mrkdwn: false``; Slack has no escape for ``*``, ``_``, ``~`` or a backtick), so
    a note reading ``*bold*`` shows its stars. The model's answer keeps Slack's formatting."""
    return {"text": _escape(outbound.text), **({} if outbound.formatted else {"mrkdwn": False})}


def _respond(respond: Any, message: dict[str, Any]) -> None:
    """Post ``message`` to the event's ``response_url``, as Bolt's ``respond`` does; that one drops fields it
    does not name, such as ``mrkdwn``."""
    from slack_sdk.webhook import WebhookClient

    if respond.response_url is None:
        raise ValueError("respond is unsupported here as there is no response_url")
    WebhookClient(url=respond.response_url, proxy=respond.proxy, ssl=respond.ssl).send_dict(message)


_MARKUP_RE = re.compile(r"<([^<>|]*)(?:\|([^<>]*))?>")


def unescape(text: str, name_of: Callable[[str], str]) -> str:
    """A person's text as they typed it, from Slack's markup: ``&amp;``/``&lt;``/``&gt;`` as the characters,
    a link as "label (url)" (or the url alone), a mail link as its address, ``<@U123>`` as "@name" (``name_of``
    gives the display name), ``<#C1|general>`` as "#general", ``<!here>`` as "@here"."""
    def readable(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith("@"):
            name = label or name_of(target[1:]) or target[1:]
            return f"@{name.lstrip('@')}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            if label:
                return label
            return f"@{special}" if special in ("here", "channel", "everyone") else ""
        address = target.removeprefix("mailto:")
        bare = re.sub(r"^https?://", "", address).rstrip("/")
        if label and label.rstrip("/") in (bare, address.rstrip("/")):
            return label  # Slack made a link of what was typed ("example.com"): as it was typed
        if not label or label in (target, address):
            return address
        return f"{label} ({address})"

    text = _MARKUP_RE.sub(readable, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def blocks(outbound: core.Outbound) -> list[dict[str, Any]] | None:
    if not outbound.buttons:
        return None
    elements = [{"type": "button", "action_id": f"memory_{button.answer}", "value": str(button.proposal_id),
                 "text": {"type": "plain_text", "text": button.label},
                 **({"style": "primary"} if button.answer == "yes" else {})}
                for button in outbound.buttons]
    return [{"type": "section", "text": {"type": "plain_text", "text": outbound.text}},
            {"type": "actions", "block_id": f"memory_confirm_{outbound.buttons[0].proposal_id}",
             "elements": elements}]


#: The longest text of one message, as posted (escaped). Slack advises under 4,000 characters and refuses a
#: section block (the question above its buttons) over 3,000.
MESSAGE_LIMIT = 3000


def _escaped_length(text: str) -> int:
    return len(_escape(text))


def post(client: WebClient, channel: str, outbound: core.Outbound, *, thread_ts: str | None = None) -> str | None:
    """Post one message, retrying rate limits and 5xx with backoff; Revoked when the token is refused. A long
    text goes as several messages (the buttons under the last); a part that fails does not keep back the
    parts after it, and the first failure is raised once all were tried. Returns the last part's ``ts``."""
    failure: SlackApiError | None = None
    posted: str | None = None
    for part in outbound.parts(MESSAGE_LIMIT, _escaped_length):
        kwargs: dict[str, Any] = {"channel": channel, **_message(part)}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        rich = blocks(part)
        if rich:
            kwargs["blocks"] = rich
        try:
            response = with_retries_sync(functools.partial(client.chat_postMessage, **kwargs), classify,
                                         what=f"slack chat.postMessage {channel}")
            posted = _ts_of(response)
        except SlackApiError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
    return posted


def _ts_of(response: Any) -> str | None:
    try:
        ts = response.get("ts")
    except AttributeError:
        return None
    return ts if isinstance(ts, str) else None


def _post_or_revoke(binding_id: int, client: WebClient, channel: str, outbound: core.Outbound, *,
                    thread_ts: str | None = None) -> None:
    try:
        posted = post(client, channel, outbound, thread_ts=thread_ts)
        if posted and outbound.buttons:  # a reply in this message's thread (or the thread it is in) answers it
            _closing(core.question_sent)(binding_id=binding_id, conversation_id=channel,
                                         proposal_id=outbound.buttons[0].proposal_id, message_ref=thread_ts or posted)
    except Revoked as exc:
        _closing(services.binding_report_revoked)(binding_id=binding_id, code=exc.code, reason=exc.reason)
        raise


def _post_all(binding_id: int, client: WebClient, channel: str, outbounds: list[core.Outbound], *,
              thread_ts: str | None = None) -> None:
    """Post the core's messages in order; one that fails is logged and does not keep back the ones after it
    (a refused token still stops everything)."""
    for outbound in outbounds:
        try:
            _post_or_revoke(binding_id, client, channel, outbound, thread_ts=thread_ts)
        except SlackApiError:
            log.warning("slack binding %s: a message to %s could not be posted", binding_id, channel, exc_info=True)


# --------------------------------------------------------------------------------------------------------
# The HTTP endpoint's apps, the runner, sending from outside an event
# --------------------------------------------------------------------------------------------------------

_http_handlers: dict[tuple[int, str], Any] = {}
_http_lock = threading.Lock()


def http_handler(binding_id: int, fingerprint: str, credentials: dict[str, str]) -> Any:
    """The Bolt Django handler that serves a binding's Events API requests (one per binding version and
    process). By default Bolt acknowledges at once (Slack wants an answer within 3 s) and runs the listener
    in its thread pool, closing that thread's database connections afterwards;
    ``BRIDGES_SLACK_PROCESS_BEFORE_RESPONSE = True`` handles the event before answering instead."""
    from slack_bolt.adapter.django import SlackRequestHandler

    before = bool(getattr(settings, "BRIDGES_SLACK_PROCESS_BEFORE_RESPONSE", False))
    key = (binding_id, f"{fingerprint}:{before}")
    with _http_lock:
        handler = _http_handlers.get(key)
        if handler is None:
            for old in [k for k in _http_handlers if k[0] == binding_id]:
                del _http_handlers[old]
            handler = _http_handlers[key] = SlackRequestHandler(
                build_app(binding_id, credentials, process_before_response=before, web=True))
        return handler


def events_url(binding_id: int) -> str:
    return f"{settings.PUBLIC_URL.rstrip('/')}/bridges/slack/{binding_id}/events"


async def run(binding_id: int, credentials: dict[str, str], mode: str, stop: asyncio.Event) -> None:
    """Run one Slack binding until ``stop``: Socket Mode connects a websocket (and once stopped, lets the turns
    in flight finish); HTTP mode only checks the token (events reach the web process). Raises Revoked when
    Slack refuses the token."""
    turns = InFlight()  # Socket Mode's: a reply cut off when runbridges stops is told on its start
    app = build_app(binding_id, credentials, turns=turns)
    # Slack's blocking calls run as the other platforms' turns do (``run_sync``): counted, so a process that
    # stops while one hangs (Slack does not answer) ends after its grace instead of waiting for the thread.
    auth = await run_sync(with_retries_sync, lambda: app.client.auth_test(), classify, what="slack auth.test")
    identity = f"{auth.get('user') or 'bot'} in {auth.get('team') or auth.get('team_id') or 'Slack'}"
    if mode != "socket":
        await run_sync(services.binding_report_connected, binding_id=binding_id, bot_identity=identity)
        await stop.wait()
        return
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    handler = SocketModeHandler(app, credentials["app_token"])
    try:
        await run_sync(handler.connect)
    except SlackApiError as exc:
        kind = classify(exc)
        if isinstance(kind, Revoked):
            raise kind from exc
        raise
    try:
        await run_sync(services.binding_report_connected, binding_id=binding_id, bot_identity=identity)
        await stop.wait()
        await turns.idle()  # the turns in flight finish and post their answers first (the runner bounds it)
    finally:
        await run_sync(handler.close)


def send_message(*, binding_id: int, credentials: dict[str, str], conversation_id: str,
                 outbound: core.Outbound) -> None:
    """Post one message from blocking code (the expiry announcement in the Celery worker)."""
    post(web_client(credentials["bot_token"]), conversation_id, outbound)
