"""A loopback Discord: REST API v10 and the gateway websocket, for driving discord.py offline.

Runs an aiohttp server with its own event loop in a daemon thread. REST: `GET /api/v10/users/@me`,
`GET /api/v10/oauth2/applications/@me`, `GET /api/v10/gateway[/bot]`, `POST|PATCH .../channels/{id}/messages`,
`POST .../users/@me/channels` (open a DM), `GET .../channels/{id}`, `POST .../channels/{id}/typing` (recorded
in `typing`), interaction callbacks and follow-ups.
Gateway: HELLO (op 10), IDENTIFY -> READY + GUILD_CREATE, heartbeat ACK (op 11), RESUME -> RESUMED, member
chunk requests; then whatever the test pushes (`push_message`, `push_button_click`). Events pushed before
the client has identified are queued and delivered right after READY.
Every JSON response carries `Content-Type: application/json` exactly: discord.py ignores any other body.
Faults: `revoke()` (401 on REST, close 4004 on IDENTIFY), `fail_next(429, retry_after=0.05)`,
`fail_next(500)` (discord.py waits 1 s before its retry), `fail_next("hang")`.
`patch_discord_py()` points `discord.http.Route.BASE` and `DiscordWebSocket.DEFAULT_GATEWAY` here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from aiohttp import WSMsgType, web

BOT_ID = 1100000000000000001
APPLICATION_ID = BOT_ID
GUILD_ID = 1100000000000000100
CHANNEL_ID = 1100000000000000200
DEFAULT_USER_ID = 1100000000000000300
OWNER_ID = 1100000000000000400

DISCORD_EPOCH_MS = 1420070400000
#: Discord refuses a message whose content is longer than this (code 50035).
MESSAGE_LIMIT = 2000
_sequence = itertools.count(1)


def shown(content: str) -> str:
    """A message's content as a Discord client shows it, as far as the tests read it: a markdown character
    escaped with a backslash (``\\*``, ``\\_``, ``\\-`` at a line's start) as the character itself."""
    return re.sub(r"\\([^\sA-Za-z0-9])", r"\1", content)


def attachment(filename: str = "bike.jpg", content_type: str = "image/jpeg") -> dict[str, Any]:
    """An attachment of a MESSAGE_CREATE, as Discord sends it."""
    attachment_id = snowflake()
    return {
        "id": str(attachment_id),
        "filename": filename,
        "size": 48213,
        "url": f"https://cdn.discordapp.com/attachments/1/{attachment_id}/{filename}",
        "proxy_url": f"https://media.discordapp.net/attachments/1/{attachment_id}/{filename}",
        "content_type": content_type,
        "width": 800,
        "height": 600,
    }


def snowflake() -> int:
    """A fresh id whose embedded timestamp is now (discord.py derives `created_at` from it)."""
    return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | (next(_sequence) & 0x3FFFFF)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def user_payload(user_id: int, username: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": username,
        "global_name": username,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


@dataclass
class _Fault:
    kind: int | str
    times: int
    method: str | None
    path: str | None
    retry_after: float


@dataclass
class _Session:
    ws: web.WebSocketResponse
    seq: int = 0
    ready: bool = False
    intents: int | None = None


@dataclass
class DiscordCall:
    method: str
    path: str
    json: Any
    headers: dict[str, str] = field(default_factory=dict)


class DiscordServer:
    """Discord REST + gateway on 127.0.0.1. `url` is the REST base (`.../api/v10`), `gateway_url` the ws."""

    def __init__(
        self,
        *,
        bot_id: int = BOT_ID,
        bot_username: str = "memory",
        application_id: int = APPLICATION_ID,
        guild_id: int = GUILD_ID,
        channel_id: int = CHANNEL_ID,
        heartbeat_interval_ms: int = 41250,
        latency_ms: int = 0,
    ) -> None:
        self.bot_id = bot_id
        self.bot_user = user_payload(bot_id, bot_username, bot=True)
        self.application_id = application_id
        self.guild_id = guild_id
        self.channel_id = channel_id
        self.thread_id = channel_id + 1  # a public thread of that channel, in GUILD_CREATE's threads
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.latency_ms = latency_ms
        self.revoked = False
        self.calls: list[DiscordCall] = []  # every REST request
        self.messages: list[dict[str, Any]] = []  # messages the bot posted or edited
        self.interaction_responses: list[dict[str, Any]] = []
        self.typing: list[int] = []  # channel ids the bot showed "typing…" in, once per call
        self.gateway_received: list[dict[str, Any]] = []  # every gateway payload from the client
        self.identified = threading.Event()
        self._users: dict[int, str] = {}
        self._dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self._channel_users: dict[int, int] = {}  # DM channel id -> user id
        self._faults: list[_Fault] = []
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._sessions: list[_Session] = []
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._port = 0

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self) -> Self:
        started = threading.Event()
        errors: list[BaseException] = []
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._setup())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                errors.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="DiscordServer", daemon=True)
        self._thread.start()
        if not started.wait(timeout=10):
            raise TimeoutError("the Discord fake did not start")
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._teardown(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def url(self) -> str:
        """The REST base, for `discord.http.Route.BASE`."""
        return f"{self.origin}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    @contextlib.contextmanager
    def patch_discord_py(self) -> Iterator[None]:
        """Point discord.py's two process-wide addresses at this server; restore them on exit."""
        import discord.gateway
        import discord.http
        import yarl

        old_base = discord.http.Route.BASE
        old_gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
        discord.http.Route.BASE = self.url
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.gateway_url + "/")
        try:
            yield
        finally:
            discord.http.Route.BASE = old_base
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway

    # -- knobs and helpers ----------------------------------------------------------------------------

    def fail_next(
        self,
        kind: int | str = 500,
        *,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        retry_after: float = 0.05,
    ) -> None:
        """Answer the next `times` REST requests (optionally of one HTTP `method` and/or whose path contains
        `path`) with status `kind` (401, 429, 500, ...) or "hang"."""
        with self._cond:
            self._faults.append(_Fault(kind, times, method.upper() if method else None, path, retry_after))

    def revoke(self) -> None:
        """From now on REST answers 401 and the gateway closes with 4004 (authentication failed)."""
        with self._cond:
            self.revoked = True

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0, message: str = "") -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout=timeout):
                raise TimeoutError(message or f"condition not met within {timeout} s")

    def wait_for_messages(self, count: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        self.wait_for(lambda: len(self.messages) >= count, timeout, f"expected {count} posted messages")
        return self.messages

    def posted_contents(self, channel_id: int | None = None) -> list[str]:
        with self._cond:
            return [
                m["content"] for m in self.messages if channel_id is None or m["channel_id"] == channel_id
            ]

    def dm_channel_id(self, user_id: int) -> int:
        """The id of the DM channel between the bot and `user_id` (stable for this server)."""
        with self._cond:
            if user_id not in self._dm_channels:
                channel_id = snowflake()
                self._dm_channels[user_id] = channel_id
                self._channel_users[channel_id] = user_id
            return self._dm_channels[user_id]

    def message_payload(
        self,
        content: str,
        *,
        author_id: int = DEFAULT_USER_ID,
        username: str = "alice",
        channel_id: int | None = None,
        guild_id: int | None = None,
        message_id: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A MESSAGE_CREATE payload: a DM when `guild_id` is None, else a message in a guild channel.
        `<@BOT_ID>` in `content` becomes a mention of the bot; `attachments` from `attachment()`; `reply_to`
        (one of `messages`, the bot's) makes it a reply to that message."""
        self._users[author_id] = username
        if channel_id is None:
            channel_id = self.dm_channel_id(author_id) if guild_id is None else self.channel_id
        mentions = [self.bot_user] if re.search(rf"<@!?{self.bot_id}>", content) else []
        payload: dict[str, Any] = {
            "id": str(message_id or snowflake()),
            "channel_id": str(channel_id),
            "author": user_payload(author_id, username),
            "content": content,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions,
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        if reply_to is not None:
            payload["type"] = 19  # REPLY
            payload["message_reference"] = {"message_id": str(reply_to["message_id"]),
                                            "channel_id": str(reply_to["channel_id"])}
            payload["referenced_message"] = {
                "id": str(reply_to["message_id"]), "channel_id": str(reply_to["channel_id"]),
                "author": self.bot_user, "content": reply_to["content"], "timestamp": _now_iso(),
                "edited_timestamp": None, "tts": False, "mention_everyone": False, "mentions": [],
                "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "type": 0, "flags": 0,
                "components": []}
        if guild_id is not None:
            payload["guild_id"] = str(guild_id)
            payload["member"] = {
                "roles": [],
                "joined_at": _now_iso(),
                "deaf": False,
                "mute": False,
                "flags": 0,
            }
        return payload

    def push_message(
        self,
        content: str,
        *,
        author_id: int = DEFAULT_USER_ID,
        username: str = "alice",
        channel_id: int | None = None,
        guild_id: int | None = None,
        message_id: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Deliver MESSAGE_CREATE to the connected client (queued until it has identified).

        A DM by default (no guild_id: discord.py makes the channel a `DMChannel`); pass
        `guild_id=server.guild_id` for a message in the guild's text channel `server.channel_id`.
        """
        payload = self.message_payload(
            content,
            author_id=author_id,
            username=username,
            channel_id=channel_id,
            guild_id=guild_id,
            message_id=message_id,
            attachments=attachments,
            reply_to=reply_to,
        )
        self._send_from_thread("MESSAGE_CREATE", payload)
        return payload

    def push_button_click(
        self,
        custom_id: str,
        *,
        author_id: int = DEFAULT_USER_ID,
        username: str = "alice",
        channel_id: int | None = None,
        guild_id: int | None = None,
        message_id: int | None = None,
        message_content: str = "Save this note?",
    ) -> dict[str, Any]:
        """Deliver INTERACTION_CREATE for a click on a button `custom_id` under a bot message."""
        self._users[author_id] = username
        user = user_payload(author_id, username)
        if channel_id is None:
            channel_id = self.dm_channel_id(author_id) if guild_id is None else self.channel_id
        message = {
            "id": str(message_id or snowflake()),
            "channel_id": str(channel_id),
            "author": self.bot_user,
            "content": message_content,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        payload: dict[str, Any] = {
            "id": str(snowflake()),
            "application_id": str(self.application_id),
            "type": 3,
            "data": {"custom_id": custom_id, "component_type": 2},
            "token": f"itoken-{snowflake()}",
            "version": 1,
            "attachment_size_limit": 8388608,
            "locale": "en-US",
            "app_permissions": "0",
            "entitlements": [],
            "channel_id": str(channel_id),
            "message": message,
        }
        if guild_id is None:
            payload["channel"] = {"id": str(channel_id), "type": 1, "recipients": [user]}
            payload["user"] = user
            payload["context"] = 1
            payload["authorizing_integration_owners"] = {"0": str(author_id)}
        else:
            message["guild_id"] = str(guild_id)
            payload["guild_id"] = str(guild_id)
            payload["guild_locale"] = "en-US"
            payload["channel"] = self._guild_channel(guild_id)
            payload["member"] = {
                "user": user,
                "roles": [],
                "joined_at": _now_iso(),
                "deaf": False,
                "mute": False,
                "flags": 0,
                "permissions": "2248473465835073",
            }
            payload["context"] = 0
            payload["authorizing_integration_owners"] = {"0": str(guild_id)}
        self._send_from_thread("INTERACTION_CREATE", payload)
        return payload

    # -- payloads -----------------------------------------------------------------------------------

    def _guild_channel(self, guild_id: int) -> dict[str, Any]:
        return {
            "id": str(self.channel_id),
            "type": 0,
            "guild_id": str(guild_id),
            "name": "general",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    def _thread_channel(self, guild_id: int) -> dict[str, Any]:
        return {
            "id": str(self.thread_id),
            "type": 11,  # a public thread
            "guild_id": str(guild_id),
            "parent_id": str(self.channel_id),
            "owner_id": str(OWNER_ID),
            "name": "weekend plans",
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 2,
            "flags": 0,
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                "archive_timestamp": _now_iso(), "locked": False},
        }

    def _guild(self) -> dict[str, Any]:
        joined = _now_iso()
        return {
            "id": str(self.guild_id),
            "name": "Team",
            "icon": None,
            "owner_id": str(OWNER_ID),
            "unavailable": False,
            "member_count": 2,
            "large": False,
            "joined_at": joined,
            "roles": [
                {
                    "id": str(self.guild_id),
                    "name": "@everyone",
                    "permissions": "2248473465835073",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "channels": [self._guild_channel(self.guild_id)],
            "members": [
                {
                    "user": self.bot_user,
                    "roles": [],
                    "joined_at": joined,
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "threads": [self._thread_channel(self.guild_id)],
            "presences": [],
            "voice_states": [],
            "emojis": [],
            "stickers": [],
            "features": [],
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "system_channel_id": None,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _ready(self) -> dict[str, Any]:
        return {
            "v": 10,
            "user": {**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0},
            "guilds": [{"id": str(self.guild_id), "unavailable": True}],
            "session_id": f"session-{snowflake()}",
            "resume_gateway_url": self.gateway_url,
            "shard": [0, 1],
            "application": {"id": str(self.application_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "session_type": "normal",
            "auth": {},
            "user_settings": {},
        }

    def _bot_message(
        self, channel_id: int, payload: dict[str, Any], message_id: int | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": str(message_id or snowflake()),
            "channel_id": str(channel_id),
            "author": self.bot_user,
            "content": payload.get("content") or "",
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": bool(payload.get("tts")),
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": payload.get("embeds") or [],
            "pinned": False,
            "type": 0,
            "flags": int(payload.get("flags") or 0),
            "components": payload.get("components") or [],
        }
        if payload.get("message_reference"):
            message["message_reference"] = payload["message_reference"]
        return message

    def _record_message(
        self, kind: str, channel_id: int, payload: dict[str, Any], message: dict[str, Any]
    ) -> None:
        self.messages.append(
            {
                "kind": kind,
                "channel_id": channel_id,
                "content": message["content"],
                "embeds": payload.get("embeds"),
                "components": payload.get("components"),
                "message_id": int(message["id"]),
                "payload": payload,
            }
        )

    # -- aiohttp side -------------------------------------------------------------------------------

    async def _setup(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/gateway/", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _teardown(self) -> None:
        assert self._stopping is not None and self._runner is not None
        self._stopping.set()
        for session in list(self._sessions):
            await session.ws.close(code=1001, message=b"server stopping")
        await self._runner.cleanup()

    def _send_from_thread(self, event: str, payload: dict[str, Any]) -> None:
        assert self._loop is not None, "the server is not started"
        asyncio.run_coroutine_threadsafe(self._dispatch(event, payload), self._loop).result(timeout=5)

    async def _dispatch(self, event: str, payload: dict[str, Any]) -> None:
        ready = [s for s in self._sessions if s.ready]
        if not ready:
            self._pending.append((event, payload))
            return
        for session in ready:
            await self._send_event(session, event, payload)

    async def _send_event(self, session: _Session, event: str, payload: dict[str, Any]) -> None:
        session.seq += 1
        await session.ws.send_str(json.dumps({"op": 0, "t": event, "s": session.seq, "d": payload}))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        session = _Session(ws=ws)
        self._sessions.append(session)
        await ws.send_str(
            json.dumps(
                {"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}, "s": None, "t": None}
            )
        )
        try:
            async for msg in ws:
                if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                    continue
                data = json.loads(msg.data)
                with self._cond:
                    self.gateway_received.append(data)
                    self._cond.notify_all()
                await self._on_gateway_payload(session, data)
        finally:
            self._sessions.remove(session)
        return ws

    async def _on_gateway_payload(self, session: _Session, data: dict[str, Any]) -> None:
        op = data.get("op")
        if op == 1:  # heartbeat
            await session.ws.send_str(json.dumps({"op": 11, "d": None, "s": None, "t": None}))
        elif op == 2:  # identify
            if self.revoked:
                await session.ws.close(code=4004, message=b"Authentication failed.")
                return
            session.intents = data["d"].get("intents")
            await self._send_event(session, "READY", self._ready())
            await self._send_event(session, "GUILD_CREATE", self._guild())
            session.ready = True
            self.identified.set()
            pending, self._pending = self._pending, []
            for event, payload in pending:
                await self._send_event(session, event, payload)
        elif op == 6:  # resume
            await self._send_event(session, "RESUMED", {})
            session.ready = True
        elif op == 8:  # request guild members
            d = data["d"]
            await self._send_event(
                session,
                "GUILD_MEMBERS_CHUNK",
                {
                    "guild_id": str(d.get("guild_id")),
                    "members": self._guild()["members"],
                    "chunk_index": 0,
                    "chunk_count": 1,
                    "not_found": [],
                    **({"nonce": d["nonce"]} if d.get("nonce") else {}),
                },
            )

    def _json(self, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        # Not web.json_response: it appends "; charset=utf-8" and discord.py then treats the body as text.
        return web.Response(
            status=status,
            body=json.dumps(payload).encode("utf-8"),
            headers={"Content-Type": "application/json", **(headers or {})},
        )

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._cond:
            for fault in self._faults:
                if (fault.method is None or fault.method == method) and (
                    fault.path is None or fault.path in path
                ):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.content_type == "multipart/form-data":
            form = await request.post()
            raw = form.get("payload_json")
            body = json.loads(raw) if isinstance(raw, str) else {}
        elif request.can_read_body:
            text = await request.text()
            body = json.loads(text) if text else None
        with self._cond:
            self.calls.append(DiscordCall(request.method, path, body, dict(request.headers)))
            self._cond.notify_all()
        if self.latency_ms:
            await asyncio.sleep(self.latency_ms / 1000)
        fault = self._take_fault(request.method, path)
        if fault is not None:
            return await self._fault_response(fault)
        if self.revoked:
            return self._json({"message": "401: Unauthorized", "code": 0}, status=401)
        with self._cond:
            response = self._route(request.method, path, body if isinstance(body, dict) else {})
            self._cond.notify_all()
        return response

    async def _fault_response(self, fault: _Fault) -> web.StreamResponse:
        if fault.kind == "hang":
            assert self._stopping is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=30)
            return self._json({"message": "server stopping", "code": 0}, status=503)
        status = int(fault.kind)
        if status == 429:
            # discord.py treats a 429 without a Via header as a Cloudflare ban and gives up at once.
            return self._json(
                {
                    "message": "You are being rate limited.",
                    "retry_after": fault.retry_after,
                    "global": False,
                    "code": 0,
                },
                status=429,
                headers={"Via": "1.1 google", "Retry-After": str(max(1, int(fault.retry_after)))},
            )
        if status == 401:
            return self._json({"message": "401: Unauthorized", "code": 0}, status=401)
        return self._json({"message": f"{status}: injected", "code": 0}, status=status)

    def _too_long(self) -> web.Response:
        """Discord's answer to a content over 2000 characters."""
        return self._json({"message": "Invalid Form Body", "code": 50035, "errors": {"content": {"_errors": [
            {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}, status=400)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> web.Response:
        if method == "GET" and path == "/users/@me":
            return self._json({**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0})
        if method == "GET" and path == "/oauth2/applications/@me":
            return self._json(
                {
                    "id": str(self.application_id),
                    "name": "Memory",
                    "icon": None,
                    "description": "",
                    "bot_public": False,
                    "bot_require_code_grant": False,
                    "verify_key": "0" * 64,
                    "owner": user_payload(OWNER_ID, "owner"),
                    "flags": 0,
                    "interactions_endpoint_url": None,
                    "summary": "",
                    "rpc_origins": [],
                    "team": None,
                    "bot": self.bot_user,
                }
            )
        if method == "GET" and path in ("/gateway", "/gateway/bot"):
            return self._json(
                {
                    "url": self.gateway_url,
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 0,
                        "max_concurrency": 1,
                    },
                }
            )
        if method == "POST" and path == "/users/@me/channels":
            user_id = int(body.get("recipient_id", 0))
            return self._json(
                {
                    "id": str(self.dm_channel_id(user_id)),
                    "type": 1,
                    "last_message_id": None,
                    "recipients": [user_payload(user_id, self._users.get(user_id, "user"))],
                }
            )
        match = re.fullmatch(r"/channels/(\d+)", path)
        if method == "GET" and match:
            channel_id = int(match.group(1))
            if channel_id in self._channel_users:
                user_id = self._channel_users[channel_id]
                return self._json(
                    {
                        "id": str(channel_id),
                        "type": 1,
                        "last_message_id": None,
                        "recipients": [user_payload(user_id, self._users.get(user_id, "user"))],
                    }
                )
            return self._json({**self._guild_channel(self.guild_id), "id": str(channel_id)})
        match = re.fullmatch(r"/channels/(\d+)/typing", path)
        if method == "POST" and match:
            self.typing.append(int(match.group(1)))
            return web.Response(status=204)
        match = re.fullmatch(r"/channels/(\d+)/messages", path)
        if method == "POST" and match:
            channel_id = int(match.group(1))
            if len(body.get("content") or "") > MESSAGE_LIMIT:
                return self._too_long()
            message = self._bot_message(channel_id, body)
            self._record_message("create", channel_id, body, message)
            return self._json(message)
        match = re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path)
        if method == "PATCH" and match:
            channel_id, message_id = int(match.group(1)), int(match.group(2))
            message = self._bot_message(channel_id, body, message_id=message_id)
            message["edited_timestamp"] = _now_iso()
            self._record_message("edit", channel_id, body, message)
            return self._json(message)
        if method == "DELETE" and match:
            return web.Response(status=204)
        match = re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path)
        if method == "POST" and match:
            kind = int(body.get("type", 0))
            data = body.get("data") or {}
            if len(data.get("content") or "") > MESSAGE_LIMIT:
                return self._too_long()
            self.interaction_responses.append(
                {"interaction_id": int(match.group(1)), "token": match.group(2), "type": kind, "data": data}
            )
            result: dict[str, Any] = {"interaction": {"id": match.group(1), "type": 3}}
            if kind in (4, 7):
                result["resource"] = {"type": kind, "message": self._bot_message(0, data)}
            return self._json(result)
        match = re.fullmatch(r"/webhooks/(\d+)/([^/]+)(/messages/(@original|\d+))?", path)
        if match and method in ("POST", "PATCH"):
            if len(body.get("content") or "") > MESSAGE_LIMIT:
                return self._too_long()
            message = self._bot_message(0, body)
            self._record_message("followup" if method == "POST" else "edit", 0, body, message)
            return self._json(message)
        return self._json({"message": "404: Not Found", "code": 0}, status=404)
