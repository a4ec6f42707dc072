"""Slack over Socket Mode: runbridges opens the socket with the app-level token and answers a direct message.

The Slack fake has no Socket Mode endpoint, so this test adds one beside it: ``apps.connections.open`` answers
with the address of a small loopback websocket that says hello, delivers Events API envelopes and records the
client's acknowledgements, as Slack's does.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import WSMsgType, web

from bridges import services
from bridges.runner import Supervisor, SupervisorThread
from tests.bridges.conftest import pair
from tests.fakes import slack_server as slack_fake
from tests.fakes.openai_server import reply
from tests.fakes.slack_server import SlackServer

pytestmark = pytest.mark.django_db(transaction=True)


class SocketModeSlack(SlackServer):
    """The Slack fake plus a Socket Mode websocket on 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[str] = []
        self.opened_with: list[str | None] = []
        self._ws_loop: asyncio.AbstractEventLoop | None = None
        self._ws_thread: threading.Thread | None = None
        self._ws_runner: web.AppRunner | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self.ws_port = 0

    def start(self) -> SocketModeSlack:
        super().start()
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._ws_loop = loop

        async def setup() -> None:
            app = web.Application()
            app.router.add_get("/link", self._socket)
            self._ws_runner = web.AppRunner(app, shutdown_timeout=0.5, handle_signals=False, access_log=None)
            await self._ws_runner.setup()
            site = web.TCPSite(self._ws_runner, "127.0.0.1", 0)
            await site.start()
            self.ws_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(setup())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._ws_thread = threading.Thread(target=run, name="SlackSocketMode", daemon=True)
        self._ws_thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._ws_loop is not None and self._ws_loop.is_running():
            async def teardown() -> None:
                for socket in list(self._sockets):
                    await socket.close()
                assert self._ws_runner is not None
                await self._ws_runner.cleanup()

            asyncio.run_coroutine_threadsafe(teardown(), self._ws_loop).result(timeout=10)
            self._ws_loop.call_soon_threadsafe(self._ws_loop.stop)
            assert self._ws_thread is not None
            self._ws_thread.join(timeout=10)
        super().stop()

    def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        self.opened_with.append(self.calls[-1].token)
        return {"url": f"ws://127.0.0.1:{self.ws_port}/link"}

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        self.notify()
        await socket.send_str(json.dumps({"type": "hello", "num_connections": 1,
                                          "debug_info": {"host": "loopback"}, "connection_info": {"app_id": "A0"}}))
        async for message in socket:
            if message.type == WSMsgType.TEXT:
                envelope_id = json.loads(message.data).get("envelope_id")
                if envelope_id:
                    with self._cond:
                        self.acks.append(envelope_id)
                        self._cond.notify_all()
        self._sockets.remove(socket)
        return socket

    def push_event(self, event: dict[str, Any]) -> str:
        """Deliver an Events API envelope over the socket to the connected client."""
        envelope_id = str(uuid.uuid4())
        envelope = {"envelope_id": envelope_id, "type": "events_api", "accepts_response_payload": False,
                    "retry_attempt": 0, "retry_reason": "", "payload": slack_fake.event_callback(event)}
        assert self._ws_loop is not None

        async def send() -> None:
            for socket in self._sockets:
                await socket.send_str(json.dumps(envelope))

        asyncio.run_coroutine_threadsafe(send(), self._ws_loop).result(timeout=5)
        return envelope_id


@pytest.fixture
def socket_slack(settings) -> Iterator[SocketModeSlack]:
    with SocketModeSlack() as server:
        settings.SLACK_API_BASE_URL = server.url
        yield server


def test_runbridges_answers_a_direct_message_over_socket_mode(owner, socket_slack, model, alice):
    binding = services.binding_create(owner_id=owner.pk, platform="slack", name="Team", mode="socket",
                                      credentials={"bot_token": "xoxb-loopback", "app_token": "xapp-loopback-1"})

    class Slack:
        platform = "slack"

    Slack.binding = binding  # type: ignore[attr-defined]
    pair(Slack, alice)  # type: ignore[arg-type]
    model.script(reply("Hello over the socket."))
    bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={binding.pk})).start()
    try:
        socket_slack.wait_for(lambda: bool(socket_slack._sockets), timeout=10, message="no socket opened")
        envelope_id = socket_slack.push_event(slack_fake.message_im("hi", user="U5550001", channel="D5550001"))
        socket_slack.wait_for_posts(1, timeout=10)
        socket_slack.wait_for(lambda: envelope_id in socket_slack.acks, timeout=10)
    finally:
        bridges.stop()

    assert socket_slack.posted_texts("D5550001") == ["Hello over the socket."]
    assert socket_slack.opened_with == ["xapp-loopback-1"]
