"""The loopback fakes speak their protocol well enough for the real clients and bot libraries.

Each test drives a real client (httpx, python-telegram-bot, slack-bolt, discord.py) against one fake and
asserts on what the fake recorded, the way the project's own tests will.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from typing import Any

import discord
import httpx
import pytest
from slack_bolt import App, BoltRequest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import InvalidToken, NetworkError, RetryAfter
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters

from tests.fakes.discord_server import DiscordServer
from tests.fakes.openai_server import OpenAIServer, reply, tool_calls
from tests.fakes.plugin import *  # the fixtures, also before the root conftest loads the plugin
from tests.fakes.slack_server import (
    SlackServer,
    event_request,
    message_channel,
    message_im,
    sign,
)
from tests.fakes.telegram_server import TelegramServer, callback_query, group_message, private_message

TELEGRAM_TOKEN = "123456:LOOPBACK-TOKEN"
SLACK_SECRET = "loopback-signing-secret"


def _chat(server: OpenAIServer, messages: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{server.url}/chat/completions",
        json={"model": "m", "messages": messages, **extra},
        headers={"Authorization": "Bearer sk-test"},
        timeout=5,
    )


# -- OpenAI ---------------------------------------------------------------------------------------------


def test_the_model_server_answers_scripted_tool_calls_and_records_what_the_model_saw(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(
        tool_calls(
            ("context_read", {"topic": "diet"}),
            ("propose_change", {"kind": "memory", "topic": "diet", "summary": "Vegetarian"}),
        ),
        reply("Noted: you are vegetarian."),
    )
    tools = [{"type": "function", "function": {"name": "context_read", "parameters": {"type": "object"}}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "I am vegetarian"}]

    first = _chat(openai_server, history, tools=tools).json()
    message = first["choices"][0]["message"]
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    calls = message["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["context_read", "propose_change"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"topic": "diet"}

    history += [message] + [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls]
    second = _chat(openai_server, history, tools=tools).json()

    assert second["choices"][0]["message"]["content"] == "Noted: you are vegetarian."
    assert openai_server.requests[0]["tools"] == tools
    assert [m["role"] for m in openai_server.last_messages] == ["user", "assistant", "tool", "tool"]
    assert openai_server.last_messages[2]["tool_call_id"] == calls[0]["id"]
    assert openai_server.unused_script == 0
    assert _chat(openai_server, history).json()["choices"][0]["message"]["content"] == "OK"


def test_a_scripted_callable_sees_the_request(openai_server: OpenAIServer) -> None:
    openai_server.script(lambda body: reply(f"{len(body['messages'])} messages"))

    answer = _chat(openai_server, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])

    assert answer.json()["choices"][0]["message"]["content"] == "2 messages"


def test_the_model_server_streams_text_and_tool_calls_as_server_sent_events(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(reply("hello there"), tool_calls(("context_read", {"topic": "a-long-topic-name"})))

    text_events = _chat(openai_server, [{"role": "user", "content": "hi"}], stream=True).text.split("\n\n")
    tool_events = _chat(openai_server, [{"role": "user", "content": "hi"}], stream=True).text.split("\n\n")

    chunks = [json.loads(e.removeprefix("data: ")) for e in text_events if e and e != "data: [DONE]"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "hello there"
    assert text_events[-2] == "data: [DONE]"
    tool_chunks = [json.loads(e.removeprefix("data: ")) for e in tool_events if e and e != "data: [DONE]"]
    arguments = "".join(
        d["function"].get("arguments", "")
        for c in tool_chunks
        for d in c["choices"][0]["delta"].get("tool_calls", [])
    )
    assert json.loads(arguments) == {"topic": "a-long-topic-name"}


def test_embeddings_are_deterministic_and_texts_sharing_words_are_close(openai_server: OpenAIServer) -> None:
    response = httpx.post(
        f"{openai_server.url}/embeddings",
        timeout=5,
        json={"model": "e", "input": ["likes green tea", "likes green tea a lot", "parks the car downtown"]},
    )

    a, b, c = (d["embedding"] for d in response.json()["data"])
    assert len(a) == 384
    assert math.isclose(sum(x * x for x in a), 1.0)
    assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.7
    assert sum(x * y for x, y in zip(a, c, strict=True)) < 0.3
    assert openai_server.embedding_requests[0]["input"][0] == "likes green tea"


def test_the_model_server_fails_on_demand_then_recovers(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(500)
    openai_server.fail_next("garbage")
    openai_server.fail_next("hang")

    assert _chat(openai_server, [{"role": "user", "content": "x"}]).status_code == 500
    garbage = _chat(openai_server, [{"role": "user", "content": "x"}])
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{openai_server.url}/chat/completions", json={"messages": []}, timeout=0.2)

    assert garbage.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        garbage.json()
    assert (
        _chat(openai_server, [{"role": "user", "content": "x"}]).json()["choices"][0]["message"]["content"]
        == "OK"
    )
    assert httpx.get(f"{openai_server.url}/models").json()["data"][0]["id"] == "fake-model"


# -- Telegram -------------------------------------------------------------------------------------------


def _telegram_app(server: TelegramServer) -> Application:  # type: ignore[type-arg]
    return (
        Application.builder()
        .token(TELEGRAM_TOKEN)
        .base_url(server.url)
        .base_file_url(server.file_url)
        .build()
    )


async def _echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Replies with what was said, offering a yes/no keyboard."""
    assert update.message is not None and update.effective_chat is not None
    keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="yes:1")]])
    await update.message.reply_text(
        f"{update.effective_chat.type}: {update.message.text}", reply_markup=keyboard
    )


def test_python_telegram_bot_replies_to_a_private_message_through_the_fake(
    telegram_server: TelegramServer,
) -> None:
    async def scenario() -> None:
        app = _telegram_app(telegram_server)
        app.add_handler(MessageHandler(filters.TEXT, _echo))
        async with app:
            await app.process_update(Update.de_json(private_message("hello", user_id=42), app.bot))
            await app.process_update(
                Update.de_json(group_message("@memory_test_bot hi", chat_id=-100777), app.bot)
            )

    asyncio.run(scenario())

    assert telegram_server.calls[0].method == "getMe"
    assert telegram_server.calls[0].token == TELEGRAM_TOKEN
    assert [(s["chat_id"], s["text"]) for s in telegram_server.sent] == [
        (42, "private: hello"),
        (-100777, "supergroup: @memory_test_bot hi"),
    ]
    assert telegram_server.sent[0]["reply_markup"] == {
        "inline_keyboard": [[{"text": "Yes", "callback_data": "yes:1"}]]
    }


def test_python_telegram_bot_answers_a_button_tap_and_edits_its_message(
    telegram_server: TelegramServer,
) -> None:
    async def on_tap(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Acknowledges the tap and edits the question."""
        query = update.callback_query
        assert query is not None
        await query.answer("Saved")
        await query.edit_message_text(f"Done ({query.data})")

    async def scenario() -> None:
        app = _telegram_app(telegram_server)
        app.add_handler(CallbackQueryHandler(on_tap))
        async with app:
            await app.process_update(
                Update.de_json(callback_query("yes:1", user_id=42, message_id=9), app.bot)
            )

    asyncio.run(scenario())

    assert telegram_server.calls_to("answerCallbackQuery")[0].params["text"] == "Saved"
    assert telegram_server.sent[-1]["method"] == "editMessageText"
    assert (telegram_server.sent[-1]["chat_id"], telegram_server.sent[-1]["message_id"]) == (42, 9)
    assert telegram_server.sent_texts(42) == ["Done (yes:1)"]


def test_python_telegram_bot_polls_updates_from_the_fake(telegram_server: TelegramServer) -> None:
    async def scenario() -> None:
        app = _telegram_app(telegram_server)
        app.add_handler(MessageHandler(filters.TEXT, _echo))
        async with app:
            await app.start()
            assert app.updater is not None
            await app.updater.start_polling(poll_interval=0, timeout=1)
            telegram_server.push_update(private_message("polled", user_id=43))
            await asyncio.to_thread(telegram_server.wait_for_sent, 1, 5)
            await app.updater.stop()
            await app.stop()

    asyncio.run(scenario())

    assert telegram_server.sent_texts(43) == ["private: polled"]
    assert telegram_server.calls_to("deleteWebhook")


def test_telegram_faults_reach_the_client_as_the_library_s_errors(telegram_server: TelegramServer) -> None:
    async def scenario() -> list[type[Exception]]:
        raised: list[type[Exception]] = []
        app = _telegram_app(telegram_server)
        async with app:
            telegram_server.fail_next(429, retry_after=7, method="sendMessage")
            telegram_server.fail_next(502, method="sendMessage")
            for _ in range(2):
                try:
                    await app.bot.send_message(chat_id=42, text="x")
                except (RetryAfter, NetworkError) as exc:
                    raised.append(type(exc))
            await app.bot.send_message(chat_id=42, text="after")
            telegram_server.revoke()
            try:
                await app.bot.send_message(chat_id=42, text="revoked")
            except InvalidToken as exc:
                raised.append(type(exc))
        return raised

    assert asyncio.run(scenario()) == [RetryAfter, NetworkError, InvalidToken]
    assert telegram_server.sent_texts() == ["after"]


# -- Slack ----------------------------------------------------------------------------------------------


def _bolt_app(server: SlackServer) -> App:
    app = App(
        signing_secret=SLACK_SECRET,
        client=WebClient(token="xoxb-loopback", base_url=server.url),
        process_before_response=True,
    )

    @app.event("message")
    def on_message(event: dict[str, Any], say: Any) -> None:
        """Echoes the message with its channel type."""
        say(f"{event['channel_type']}: {event['text']}")

    @app.action("confirm")
    def on_confirm(ack: Any, body: dict[str, Any], respond: Any) -> None:
        """Acknowledges the click and replaces the question."""
        ack()
        respond(f"Saved ({body['actions'][0]['value']})")

    return app


def _dispatch(app: App, body: str, headers: dict[str, str]) -> int:
    return app.dispatch(BoltRequest(body=body, headers=headers)).status


def test_slack_bolt_answers_a_signed_direct_message_through_the_fake(slack_server: SlackServer) -> None:
    app = _bolt_app(slack_server)
    im = event_request(message_im("hello", channel="D42"), signing_secret=SLACK_SECRET)
    channel = event_request(message_channel("hi all", channel="C42"), signing_secret=SLACK_SECRET)

    assert _dispatch(app, im.body, im.headers) == 200
    assert _dispatch(app, channel.body, channel.headers) == 200

    assert [(p["method"], p["channel"], p["text"]) for p in slack_server.posts] == [
        ("chat.postMessage", "D42", "im: hello"),
        ("chat.postMessage", "C42", "channel: hi all"),
    ]
    assert slack_server.calls[0].method == "auth.test"
    assert slack_server.calls[-1].token == "xoxb-loopback"


def test_slack_bolt_refuses_a_request_with_a_wrong_signature(slack_server: SlackServer) -> None:
    app = _bolt_app(slack_server)
    forged = event_request(message_im("hello"), signing_secret="not-the-secret")

    assert _dispatch(app, forged.body, forged.headers) == 401
    assert slack_server.posts == []


def test_slack_bolt_handles_a_button_click_and_responds_to_the_response_url(
    slack_server: SlackServer,
) -> None:
    app = _bolt_app(slack_server)
    click = slack_server.block_actions_request("confirm", "p-7", signing_secret=SLACK_SECRET)

    assert _dispatch(app, click.body, click.headers) == 200

    assert slack_server.responses[0]["text"] == "Saved (p-7)"


def test_slack_faults_reach_the_sdk_as_errors(slack_server: SlackServer) -> None:
    client = WebClient(token="xoxb-loopback", base_url=slack_server.url)
    slack_server.fail_next(429, retry_after=3, method="chat.postMessage")
    slack_server.fail_next(500, method="chat.postMessage")

    errors = []
    for _ in range(2):
        with pytest.raises(SlackApiError) as caught:
            client.chat_postMessage(channel="D1", text="x")
        errors.append((caught.value.response.status_code, caught.value.response.get("error")))
    client.chat_postMessage(channel="D1", text="after")
    slack_server.revoke("token_revoked")
    with pytest.raises(SlackApiError) as revoked:
        client.auth_test()

    assert errors == [(429, "ratelimited"), (500, "internal_error")]
    assert revoked.value.response["error"] == "token_revoked"
    assert slack_server.posted_texts() == ["after"]


def test_a_signed_request_passes_slack_s_own_verifier() -> None:
    from slack_sdk.signature import SignatureVerifier

    signed = sign('{"a": 1}', signing_secret=SLACK_SECRET)

    assert SignatureVerifier(SLACK_SECRET).is_valid_request(signed.body, signed.headers)


# -- Discord --------------------------------------------------------------------------------------------


class _EchoBot:
    """A discord.py client that echoes messages and button clicks, and counts what it finished handling."""

    def __init__(self, expected: int) -> None:
        intents = discord.Intents.default()
        intents.message_content = True
        self.client = discord.Client(intents=intents, guild_ready_timeout=0.05)
        self.ready = asyncio.Event()
        self.done = asyncio.Event()
        self.seen: list[discord.Message] = []
        self.handled: list[str] = []
        self.client.event(self.on_ready)
        self.client.event(self.on_message)
        self.client.event(self.on_interaction)
        self._expected = expected

    def _finished(self, what: str) -> None:
        self.handled.append(what)
        if len(self.handled) >= self._expected:
            self.done.set()

    async def on_ready(self) -> None:
        self.ready.set()

    async def on_message(self, message: discord.Message) -> None:
        """Echoes what a person said, naming the kind of channel."""
        if message.author == self.client.user:
            return
        self.seen.append(message)
        kind = "dm" if isinstance(message.channel, discord.DMChannel) else "guild"
        sent = await message.channel.send(f"{kind}: {message.content}")
        self._finished(f"sent {sent.content}")

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Answers a button click."""
        custom_id = (interaction.data or {}).get("custom_id")
        await interaction.response.send_message(f"clicked {custom_id}")
        self._finished(f"answered {custom_id}")


def test_discord_py_answers_a_dm_and_a_guild_message_through_the_fake_gateway(
    discord_server: DiscordServer,
) -> None:
    bot = _EchoBot(expected=3)

    async def scenario() -> None:
        with discord_server.patch_discord_py():
            task = asyncio.create_task(bot.client.start("loopback-token"))
            await asyncio.wait_for(bot.ready.wait(), 5)
            discord_server.push_message("hello", author_id=77)
            discord_server.push_message(
                f"<@{discord_server.bot_id}> hi all", guild_id=discord_server.guild_id
            )
            discord_server.push_button_click("confirm:1", author_id=77)
            await asyncio.wait_for(bot.done.wait(), 5)
            await bot.client.close()
            await asyncio.wait_for(task, 5)

    asyncio.run(scenario())

    assert sorted(bot.handled) == sorted(
        ["sent dm: hello", f"sent guild: <@{discord_server.bot_id}> hi all", "answered confirm:1"]
    )
    seen = sorted(bot.seen, key=lambda m: m.content)
    assert isinstance(seen[1].channel, discord.DMChannel)
    assert isinstance(seen[0].channel, discord.TextChannel)
    assert [(m["channel_id"], m["content"]) for m in discord_server.messages] == [
        (discord_server.dm_channel_id(77), "dm: hello"),
        (discord_server.channel_id, f"guild: <@{discord_server.bot_id}> hi all"),
    ]
    assert discord_server.interaction_responses[0]["data"]["content"] == "clicked confirm:1"
    identify = next(p for p in discord_server.gateway_received if p["op"] == 2)
    assert identify["d"]["token"] == "loopback-token"
    assert discord_server.calls[0].headers["Authorization"] == "Bot loopback-token"
    assert discord.http.Route.BASE == "https://discord.com/api/v10"


def test_discord_faults_reach_discord_py(discord_server: DiscordServer) -> None:
    async def scenario() -> list[str]:
        outcomes: list[str] = []
        with discord_server.patch_discord_py():
            discord_server.fail_next(401)
            client = discord.Client(intents=discord.Intents.default())
            try:
                await client.login("revoked")
            except discord.LoginFailure:
                outcomes.append("login failure")
            finally:
                await client.close()

            client = discord.Client(intents=discord.Intents.default())
            await client.login("ok")
            channel = await client.fetch_channel(discord_server.channel_id)  # guild channel needs no cache
            discord_server.fail_next(429, retry_after=0.05, method="POST")
            await channel.send("after a rate limit")  # type: ignore[union-attr]
            outcomes.append("sent after 429")
            await client.close()
        return outcomes

    assert asyncio.run(scenario()) == ["login failure", "sent after 429"]
    assert discord_server.posted_contents() == ["after a rate limit"]
    assert [c.method for c in discord_server.calls].count("POST") == 2


# -- life cycle -----------------------------------------------------------------------------------------


def test_stopping_a_fake_leaves_no_thread_behind() -> None:
    before = set(threading.enumerate())
    for fake in (OpenAIServer(), TelegramServer(), SlackServer(), DiscordServer()):
        with fake:
            if isinstance(fake, DiscordServer):
                httpx.get(f"{fake.url}/gateway")
            else:
                with httpx.Client() as client:  # a keep-alive connection still open at stop()
                    client.get(f"{fake.origin}/nothing")
                    fake.stop()

    assert set(threading.enumerate()) - before == set()


def test_the_telegram_fake_makes_mentions_of_a_plain_texts_usernames_as_telegram_does() -> None:
    """A username is 4 to 32 of [A-Za-z0-9_]; an "@" inside a word (an address), one followed by a word
    joiner, or one inside a link mentions nobody. Offsets and lengths are UTF-16 code units."""
    from tests.fakes.telegram_server import mention_entities

    assert mention_entities("🙂 ask @bob_smith, not @bob or a@example_com or @\u2060bob_smith") == [
        {"type": "mention", "offset": 7, "length": 10}]
    assert mention_entities("@" + "a" * 33) == []
    assert mention_entities("see https://mastodon.social/@bob_smith, or @anna") == [
        {"type": "mention", "offset": 43, "length": 5}]
    # a word joiner ends the link, and what follows it is text again
    assert mention_entities("https://a.example/@\u2060x/@bob_smith") == [
        {"type": "mention", "offset": 22, "length": 10}]
