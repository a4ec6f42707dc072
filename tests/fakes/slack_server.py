"""A loopback Slack Web API plus builders of signed Events API and interactivity requests.

The server answers `http://127.0.0.1:PORT/api/<method>`: auth.test, chat.postMessage, chat.postEphemeral,
chat.update, chat.delete, conversations.info, users.info; any other method answers `{"ok": true}`.
Posts are recorded in `posts`, every call in `calls`, and POSTs to the `response_url` of interactive payloads
built by `server.block_actions_request` in `responses`.
The builders sign requests the way Slack does (`X-Slack-Signature`, `X-Slack-Request-Timestamp`, checked by
`slack_sdk.signature.SignatureVerifier`), for `slack_bolt.BoltRequest` or a Django test client.
Faults: `revoke("token_revoked" | "invalid_auth")`, `fail_next(429, retry_after=1)`, `fail_next(500)`,
optionally limited to one `method=`.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from tests.fakes._loopback import Fault, LoopbackHTTPServer, Request, Response, json_response

TEAM_ID = "T0TEAM001"
API_APP_ID = "A0APP0001"
BOT_USER_ID = "U0BOT0001"
BOT_ID = "B0BOT0001"
DEFAULT_USER_ID = "U0ALICE01"
DEFAULT_DM_CHANNEL = "D0ALICE01"
DEFAULT_CHANNEL = "C0GENERAL"

_ts_counter = itertools.count(1)


def _ts() -> str:
    return f"{int(time.time())}.{next(_ts_counter):06d}"


@dataclass(frozen=True)
class SignedRequest:
    """A request as Slack would deliver it: the raw body and the headers, signature included."""

    body: str
    headers: dict[str, str]

    @property
    def content_type(self) -> str:
        return self.headers["Content-Type"]

    def django_headers(self) -> dict[str, str]:
        """Headers for `django.test.Client.post(..., headers=...)` (without Content-Type)."""
        return {k: v for k, v in self.headers.items() if k != "Content-Type"}


def sign(
    body: str,
    *,
    signing_secret: str,
    timestamp: int | None = None,
    content_type: str = "application/json",
    retry_num: int | None = None,
) -> SignedRequest:
    """Sign `body` with `signing_secret` (timestamp defaults to now, as Slack's verifier expects)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body),
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    return SignedRequest(body=body, headers=headers)


# -- event builders -----------------------------------------------------------------------------------


def message_event(
    text: str,
    *,
    user: str = DEFAULT_USER_ID,
    channel: str = DEFAULT_DM_CHANNEL,
    channel_type: str = "im",
    ts: str | None = None,
    thread_ts: str | None = None,
    bot_id: str | None = None,
    team: str = TEAM_ID,
    subtype: str | None = None,
    files: list[dict[str, Any]] | None = None,
    parent_user_id: str | None = None,
) -> dict[str, Any]:
    """The inner `event` of a message (channel_type "im", "mpim", "channel" or "group"); `subtype` as Slack
    names it ("file_share" with `files`, "thread_broadcast", "channel_join", ...); a reply in a thread has
    `thread_ts` and the `parent_user_id` of the thread's first message."""
    ts = ts or _ts()
    event: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": channel_type,
        "team": team,
        "client_msg_id": str(uuid.uuid4()),
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    if parent_user_id is not None:
        event["parent_user_id"] = parent_user_id
    if subtype is not None:
        event["subtype"] = subtype
    if files is not None:
        event["files"] = files
        event["upload"] = True
    if bot_id is not None:
        event["bot_id"] = bot_id
        event["subtype"] = "bot_message"
        event.pop("client_msg_id")
    return event


def shared_file(name: str = "bike.jpg", mimetype: str = "image/jpeg") -> dict[str, Any]:
    """A file object as a `file_share` message carries it."""
    file_id = f"F{uuid.uuid4().hex[:10].upper()}"
    return {
        "id": file_id,
        "created": int(time.time()),
        "name": name,
        "title": name,
        "mimetype": mimetype,
        "filetype": name.rsplit(".", 1)[-1],
        "size": 48213,
        "mode": "hosted",
        "url_private": f"https://files.slack.com/files-pri/{TEAM_ID}-{file_id}/{name}",
    }


def message_im(
    text: str, *, user: str = DEFAULT_USER_ID, channel: str = DEFAULT_DM_CHANNEL, **kwargs: Any
) -> dict[str, Any]:
    """A message.im event: a direct message to the bot."""
    return message_event(text, user=user, channel=channel, channel_type="im", **kwargs)


def message_channel(
    text: str, *, user: str = DEFAULT_USER_ID, channel: str = DEFAULT_CHANNEL, **kwargs: Any
) -> dict[str, Any]:
    """A message.channels event: a message in a public channel the bot is in."""
    return message_event(text, user=user, channel=channel, channel_type="channel", **kwargs)


def event_callback(
    event: dict[str, Any],
    *,
    event_id: str | None = None,
    team_id: str = TEAM_ID,
    api_app_id: str = API_APP_ID,
    bot_user_id: str = BOT_USER_ID,
) -> dict[str, Any]:
    """The Events API envelope around `event`."""
    return {
        "token": "legacy-verification-token",
        "team_id": team_id,
        "api_app_id": api_app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team_id,
                "user_id": bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{uuid.uuid4().hex}",
    }


def event_request(
    event: dict[str, Any],
    *,
    signing_secret: str,
    event_id: str | None = None,
    timestamp: int | None = None,
    retry_num: int | None = None,
    **envelope: Any,
) -> SignedRequest:
    """A signed Events API request carrying `event` (e.g. `message_im("hi")`)."""
    body = json.dumps(event_callback(event, event_id=event_id, **envelope))
    return sign(body, signing_secret=signing_secret, timestamp=timestamp, retry_num=retry_num)


def url_verification_request(challenge: str, *, signing_secret: str) -> SignedRequest:
    body = json.dumps(
        {"token": "legacy-verification-token", "challenge": challenge, "type": "url_verification"}
    )
    return sign(body, signing_secret=signing_secret)


def block_actions_payload(
    action_id: str,
    value: str,
    *,
    user: str = DEFAULT_USER_ID,
    channel: str = DEFAULT_DM_CHANNEL,
    message_ts: str | None = None,
    message_text: str = "Save this note?",
    block_id: str = "memory_confirm",
    response_url: str = "https://hooks.slack.invalid/actions/T0/1/x",
    team_id: str = TEAM_ID,
    api_app_id: str = API_APP_ID,
) -> dict[str, Any]:
    """The interactive payload Slack sends when someone clicks a button (`block_actions`)."""
    message_ts = message_ts or _ts()
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team_id},
        "api_app_id": api_app_id,
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "trigger_id": f"{int(time.time())}.1.{uuid.uuid4().hex[:12]}",
        "team": {"id": team_id, "domain": "loopback"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "directmessage" if channel.startswith("D") else "general"},
        "message": {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "ts": message_ts,
            "text": message_text,
            "team": team_id,
            "blocks": [],
        },
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "value": value,
                "type": "button",
                "text": {"type": "plain_text", "text": value, "emoji": True},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def interactive_request(
    payload: dict[str, Any], *, signing_secret: str, timestamp: int | None = None
) -> SignedRequest:
    """A signed interactivity request: the payload JSON in a `payload` form field, as Slack posts it."""
    body = urlencode({"payload": json.dumps(payload)})
    return sign(
        body,
        signing_secret=signing_secret,
        timestamp=timestamp,
        content_type="application/x-www-form-urlencoded",
    )


def slash_command_request(
    command: str, text: str, *, user: str, channel: str, signing_secret: str, response_url: str,
    channel_name: str = "directmessage", timestamp: int | None = None,
) -> SignedRequest:
    """A signed slash command, form-encoded as Slack posts it to the command's Request URL."""
    body = urlencode({
        "token": "unused", "team_id": TEAM_ID, "channel_id": channel, "channel_name": channel_name,
        "user_id": user, "user_name": user.lower(), "command": command, "text": text,
        "response_url": response_url, "trigger_id": f"trig.{_ts()}", "api_app_id": "A0APP",
    })
    return sign(body, signing_secret=signing_secret, timestamp=timestamp,
                content_type="application/x-www-form-urlencoded")


# -- server -------------------------------------------------------------------------------------------


@dataclass
class SlackCall:
    method: str
    token: str | None
    params: dict[str, Any]


class SlackServer(LoopbackHTTPServer):
    """Slack Web API on 127.0.0.1. Give `slack_sdk.WebClient(base_url=server.url)` (ends with /api/)."""

    def __init__(
        self,
        *,
        team_id: str = TEAM_ID,
        bot_user_id: str = BOT_USER_ID,
        bot_id: str = BOT_ID,
        latency_ms: int = 0,
    ) -> None:
        super().__init__(latency_ms=latency_ms)
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.auth_error: str | None = None
        self.users: dict[str, dict[str, Any]] = {}  # overrides for users.info
        self.calls: list[SlackCall] = []
        self.posts: list[dict[str, Any]] = []  # {method, channel, text, blocks, thread_ts, ts, params}
        self.responses: list[dict[str, Any]] = []  # bodies POSTed to response_url
        self._response_ids = itertools.count(1)

    @property
    def url(self) -> str:
        return f"{self.origin}/api/"

    # -- test helpers ---------------------------------------------------------------------------------

    def revoke(self, error: str = "token_revoked") -> None:
        """From now on every call answers `{"ok": false, "error": error}` (token_revoked, invalid_auth)."""
        with self._cond:
            self.auth_error = error

    def posted_texts(self, channel: str | None = None) -> list[str]:
        with self._cond:
            return [p["text"] for p in self.posts if channel is None or p["channel"] == channel]

    def calls_to(self, method: str) -> list[SlackCall]:
        with self._cond:
            return [c for c in self.calls if c.method == method]

    def wait_for_posts(self, count: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        self.wait_for(lambda: len(self.posts) >= count, timeout, f"expected {count} posts")
        return self.posts

    def block_actions_request(
        self, action_id: str, value: str, *, signing_secret: str, **kwargs: Any
    ) -> SignedRequest:
        """A signed button click whose `response_url` points back at this server (see `responses`)."""
        response_url = f"{self.origin}/actions/{next(self._response_ids)}"
        payload = block_actions_payload(
            action_id, value, response_url=response_url, team_id=self.team_id, **kwargs
        )
        return interactive_request(payload, signing_secret=signing_secret)

    def slash_command_request(self, command: str, text: str, *, signing_secret: str, **kwargs: Any) -> SignedRequest:
        """A signed slash command whose `response_url` points back at this server (see `responses`)."""
        return slash_command_request(command, text, signing_secret=signing_secret,
                                     response_url=f"{self.origin}/actions/{next(self._response_ids)}", **kwargs)

    # -- HTTP -----------------------------------------------------------------------------------------

    def fault_matches(self, fault: Fault, request: Request) -> bool:
        method = fault.options.get("method")
        if method is not None and request.path.rsplit("/", 1)[-1] != method:
            return False
        return super().fault_matches(fault, request)

    def error_response(self, fault: Fault, request: Request) -> Response:
        status = int(fault.kind)
        if status == 429:
            return json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(fault.options.get("retry_after", 1))},
            )
        if status >= 500:
            return json_response({"ok": False, "error": "internal_error"}, status=status)
        return json_response(
            {"ok": False, "error": fault.options.get("error", "invalid_auth")}, status=status
        )

    def handle(self, request: Request) -> Response:
        if request.path.startswith("/actions/"):
            self.responses.append(request.json or request.form)
            return Response(status=200, body=b"ok", headers={"Content-Type": "text/plain"})
        match = re.fullmatch(r"/api/([\w.]+)", request.path)
        if match is None:
            return json_response({"ok": False, "error": "unknown_method"}, status=404)
        method = match.group(1)
        authorization = request.headers.get("authorization", "")
        token = authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else None
        params = dict(request.params)
        token = token or params.pop("token", None)
        for key in ("blocks", "attachments"):
            if isinstance(params.get(key), str):
                try:
                    params[key] = json.loads(params[key])
                except ValueError:
                    pass
        self.calls.append(SlackCall(method=method, token=token, params=params))
        if token is None:
            return json_response({"ok": False, "error": "not_authed"})
        if self.auth_error is not None:
            return json_response({"ok": False, "error": self.auth_error})
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        result: dict[str, Any] = handler(params) if handler else {}
        return json_response({"ok": True, **result})

    # -- methods --------------------------------------------------------------------------------------

    def _record(self, method: str, params: dict[str, Any], ts: str) -> None:
        self.posts.append(
            {
                "method": method,
                "channel": params.get("channel"),
                "text": params.get("text"),
                "blocks": params.get("blocks"),
                "thread_ts": params.get("thread_ts"),
                "ts": ts,
                "params": params,
            }
        )

    def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://loopback.slack.invalid/",
            "team": "Loopback",
            "user": "memory",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        refusal = _refusal(params)
        if refusal is not None:
            return {"ok": False, "error": refusal}
        ts = _ts()
        self._record("chat.postMessage", params, ts)
        message = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "text": params.get("text"),
            "ts": ts,
            "team": self.team_id,
        }
        if params.get("blocks"):
            message["blocks"] = params["blocks"]
        if params.get("thread_ts"):
            message["thread_ts"] = params["thread_ts"]
        return {"channel": params.get("channel"), "ts": ts, "message": message}

    def _api_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = _ts()
        self._record("chat.postEphemeral", params, ts)
        return {"message_ts": ts}

    def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = str(params.get("ts"))
        self._record("chat.update", params, ts)
        return {
            "channel": params.get("channel"),
            "ts": ts,
            "text": params.get("text"),
            "message": {"type": "message", "user": self.bot_user_id, "text": params.get("text"), "ts": ts},
        }

    def _api_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"channel": params.get("channel"), "ts": params.get("ts")}

    def _api_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        is_im = channel.startswith("D")
        info: dict[str, Any] = {
            "id": channel,
            "created": 1700000000,
            "is_im": is_im,
            "is_channel": channel.startswith("C"),
            "is_group": channel.startswith("G"),
            "is_mpim": False,
            "is_private": not channel.startswith("C"),
            "is_archived": False,
        }
        if is_im:
            info["user"] = DEFAULT_USER_ID
        else:
            info["name"] = "general" if channel == DEFAULT_CHANNEL else channel.lower()
        return {"channel": info}

    def _api_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user_id = str(params.get("user", ""))
        if user_id in self.users:
            return {"user": self.users[user_id]}
        name = user_id.lower()
        return {
            "user": {
                "id": user_id,
                "team_id": self.team_id,
                "name": name,
                "real_name": f"User {user_id}",
                "deleted": False,
                "is_bot": user_id == self.bot_user_id,
                "tz": "UTC",
                "profile": {"display_name": name, "real_name": f"User {user_id}"},
            }
        }


def _refusal(params: dict[str, Any]) -> str | None:
    """Slack's error for a message it does not take: a text over 40,000 characters, a section block's text
    over 3,000."""
    if len(str(params.get("text") or "")) > 40000:
        return "msg_too_long"
    for block in params.get("blocks") or []:
        if isinstance(block, dict) and len(str((block.get("text") or {}).get("text") or "")) > 3000:
            return "invalid_blocks"
    return None
