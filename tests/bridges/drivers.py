"""Drivers that play the people on each platform: they deliver real platform payloads through the real bot
library (to our webhook/Events endpoints, or over the Discord gateway) and read what the bot sent back from
the loopback server. The scenario tests are written once against ``Driver`` and run for every platform.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.test import Client

from bridges.models import Binding
from bridges.runner import Supervisor, SupervisorThread
from bridges.selectors import binding_credentials
from tests.fakes import slack_server as slack_fake
from tests.fakes import telegram_server as telegram_fake
from tests.fakes.discord_server import DiscordServer, attachment, shown
from tests.fakes.slack_server import SlackServer
from tests.fakes.telegram_server import TelegramServer

CODE_RE = re.compile(r"pairing code ([A-Z0-9]{6})")


@dataclass(frozen=True)
class Person:
    """Somebody on the platform: a numeric id works on all three (Slack gets a U-prefixed one)."""

    number: int
    name: str


@dataclass
class Said:
    """What the bot sent in answer to one delivery: its texts and any Yes/No buttons (answer, proposal id)."""

    texts: list[str]
    buttons: list[tuple[str, int]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    def pairing_code(self) -> str:
        match = CODE_RE.search(self.text)
        assert match, self.text
        return match.group(1)


@dataclass
class Tapped:
    """What a tap on a Yes/No button led to, by who sees it: posted in the chat for everyone (``public``),
    shown to the tapper alone (``private``: Telegram's answer to the tap, a Slack ephemeral message, a Discord
    ephemeral response), and what the question itself now says (``card``: Slack and Discord replace it)."""

    public: list[str] = field(default_factory=list)
    private: list[str] = field(default_factory=list)
    card: list[str] = field(default_factory=list)


class Driver:
    """One bot binding seen from the platform's side."""

    platform: str
    binding: Binding

    def dm(self, person: Person, text: str, *, expect: int = 1, repeat: int = 1) -> Said:
        """``person`` writes ``text`` to the bot directly (delivered ``repeat`` times, as a retry would)."""
        raise NotImplementedError

    def group(self, person: Person, text: str, *, expect: int = 1) -> Said:
        """``person`` writes ``text`` in the shared group, mentioning the bot."""
        raise NotImplementedError

    def remember(self, person: Person, fact: str, *, expect: int = 1) -> Said:
        """``/remember <fact>`` in ``person``'s direct chat with the bot, as the platform delivers it."""
        return self.dm(person, f"/remember {fact}", expect=expect)

    def memory(self, person: Person) -> Said:
        """``/memory`` in ``person``'s direct chat with the bot, as the platform delivers it."""
        return self.dm(person, "/memory")

    def start_over(self, person: Person) -> Said:
        """``/new`` in ``person``'s direct chat with the bot, as the platform delivers it."""
        return self.dm(person, "/new")

    def reply(self, person: Person, text: str, proposal_id: int) -> Said:
        """``person`` answers the bot's question about ``proposal_id`` in their direct chat by replying to its
        message with ``text``: a reply on Telegram and Discord, a message in the question's thread on Slack."""
        raise NotImplementedError

    def share_photo(self, person: Person, caption: str = "", *, in_group: bool = False) -> Said:
        """``person`` sends a photo with ``caption`` (none: a photo alone) to the bot directly, or in the group
        (mentioning the bot only if ``caption`` does)."""
        raise NotImplementedError

    def tap(self, person: Person, answer: str, proposal_id: int, *, expect: int = 1) -> Said:
        """``person`` taps Yes or No under the question about ``proposal_id`` in their direct chat."""
        raise NotImplementedError

    def tap_seen(self, person: Person, answer: str, proposal_id: int, *, in_group: bool = False) -> Tapped:
        """``person`` taps Yes or No under the question about ``proposal_id`` in their direct chat, or in the
        group; what came of it, by who sees it."""
        raise NotImplementedError

    def dm_id(self, person: Person) -> str:
        """The platform's id of the direct chat between ``person`` and the bot."""
        raise NotImplementedError

    def group_id(self) -> str:
        raise NotImplementedError

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------------------
# Telegram: updates posted to our webhook view, handled by python-telegram-bot
# --------------------------------------------------------------------------------------------------------


class TelegramDriver(Driver):
    platform = "telegram"
    GROUP_ID = -1001234567890

    def __init__(self, server: TelegramServer, binding: Binding) -> None:
        self.server, self.binding = server, binding
        self.secret = binding_credentials(binding=binding)["webhook_secret"]
        self.web = Client()

    def post(self, update: dict[str, Any], *, secret: str | None = None) -> int:
        response = self.web.post(f"/bridges/telegram/{self.binding.pk}/webhook", data=json.dumps(update),
                                 content_type="application/json",
                                 headers={"X-Telegram-Bot-Api-Secret-Token": self.secret if secret is None else secret})
        return response.status_code

    def _deliver(self, update: dict[str, Any], repeat: int) -> Said:
        before = len(self.server.sent)
        for _ in range(repeat):
            assert self.post(update) == 200
        return self._said(before)

    def _said(self, before: int) -> Said:
        sent = self.server.sent[before:]
        buttons = []
        for item in sent:
            markup = item.get("reply_markup")
            for row in (markup or {}).get("inline_keyboard", []) if isinstance(markup, dict) else []:
                for button in row:
                    _, answer, pid = button["callback_data"].split(":")
                    buttons.append((answer, int(pid)))
        return Said([item["text"] for item in sent], buttons)

    def dm(self, person: Person, text: str, *, expect: int = 1, repeat: int = 1) -> Said:
        return self._deliver(telegram_fake.private_message(text, user_id=person.number, first_name=person.name,
                                                           username=person.name.lower()), repeat)

    def group(self, person: Person, text: str, *, expect: int = 1) -> Said:
        return self._deliver(telegram_fake.group_message(f"@{telegram_fake.BOT_USERNAME} {text}",
                                                         chat_id=self.GROUP_ID, user_id=person.number,
                                                         first_name=person.name, username=person.name.lower()), 1)

    def group_as_typed(self, person: Person, text: str) -> Said:
        """``person`` writes ``text`` in the group exactly so, without mentioning the bot (a command picked
        from Telegram's list arrives as ``/command@botname``)."""
        return self._deliver(telegram_fake.group_message(text, chat_id=self.GROUP_ID, user_id=person.number,
                                                         first_name=person.name, username=person.name.lower()), 1)

    def reply(self, person: Person, text: str, proposal_id: int) -> Said:
        question = next(item for item in self.server.sent if f":{proposal_id}" in str(item.get("reply_markup")))
        asked = {"message_id": question["message_id"], "date": 0, "text": question["text"],
                 "chat": {"id": person.number, "type": "private", "first_name": person.name},
                 "from": {"id": telegram_fake.BOT_ID, "is_bot": True, "first_name": "Memory",
                          "username": telegram_fake.BOT_USERNAME}}
        return self._deliver(telegram_fake.private_message(text, user_id=person.number, first_name=person.name,
                                                           username=person.name.lower(), reply_to=asked), 1)

    def share_photo(self, person: Person, caption: str = "", *, in_group: bool = False) -> Said:
        who = {"user_id": person.number, "first_name": person.name, "username": person.name.lower()}
        update = (telegram_fake.group_message("-", chat_id=self.GROUP_ID, **who) if in_group
                  else telegram_fake.private_message("-", **who))
        return self._deliver(telegram_fake.with_photo(update, caption), 1)

    def tap(self, person: Person, answer: str, proposal_id: int, *, expect: int = 1) -> Said:
        before = len(self.server.sent)
        answered = len(self.server.calls_to("answerCallbackQuery"))
        update = telegram_fake.callback_query(f"memory:{answer}:{proposal_id}", user_id=person.number,
                                              first_name=person.name, username=person.name.lower())
        assert self.post(update) == 200
        said = self._said(before)
        toasts = [c.params.get("text", "") for c in self.server.calls_to("answerCallbackQuery")[answered:]]
        return Said([*toasts, *said.texts], said.buttons)

    def tap_seen(self, person: Person, answer: str, proposal_id: int, *, in_group: bool = False) -> Tapped:
        before = len(self.server.sent)
        answered = len(self.server.calls_to("answerCallbackQuery"))
        where: dict[str, Any] = {"chat_id": self.GROUP_ID, "chat_type": "supergroup"} if in_group else {}
        update = telegram_fake.callback_query(f"memory:{answer}:{proposal_id}", user_id=person.number,
                                              first_name=person.name, username=person.name.lower(), **where)
        assert self.post(update) == 200
        toasts = [c.params.get("text") or "" for c in self.server.calls_to("answerCallbackQuery")[answered:]]
        assert len(toasts) == 1, toasts  # every tap is answered, once
        return Tapped(public=[item["text"] for item in self.server.sent[before:]], private=[t for t in toasts if t])

    def dm_id(self, person: Person) -> str:
        return str(person.number)

    def group_id(self) -> str:
        return str(self.GROUP_ID)


# --------------------------------------------------------------------------------------------------------
# Slack: signed Events API and interactivity requests to our endpoint, handled by slack-bolt
# --------------------------------------------------------------------------------------------------------


class SlackDriver(Driver):
    platform = "slack"
    GROUP_ID = "C0GENERAL"

    def __init__(self, server: SlackServer, binding: Binding, signing_secret: str) -> None:
        self.server, self.binding, self.secret = server, binding, signing_secret
        self.web = Client()

    @staticmethod
    def user(person: Person) -> str:
        return f"U{person.number}"

    def post(self, signed: slack_fake.SignedRequest) -> int:
        response = self.web.post(f"/bridges/slack/{self.binding.pk}/events", data=signed.body,
                                 content_type=signed.content_type, headers=signed.django_headers())
        return response.status_code

    def _said(self, before: int) -> Said:
        posts = self.server.posts[before:]
        buttons = []
        for post in posts:
            for block in post.get("blocks") or []:
                for element in block.get("elements", []):
                    buttons.append((element["action_id"].removeprefix("memory_"), int(element["value"])))
        texts = [p["text"] for p in posts] + [r.get("text", "") for r in self.server.responses[self._responses:]]
        return Said(texts, buttons)

    def _deliver(self, event: dict[str, Any], repeat: int) -> Said:
        before = len(self.server.posts)
        self._responses = len(self.server.responses)
        event_id = f"Ev{event['ts'].replace('.', '')}"
        for attempt in range(repeat):
            signed = slack_fake.event_request(event, signing_secret=self.secret, event_id=event_id,
                                              retry_num=attempt or None)
            assert self.post(signed) == 200
        return self._said(before)

    def dm(self, person: Person, text: str, *, expect: int = 1, repeat: int = 1) -> Said:
        return self._deliver(slack_fake.message_im(text, user=self.user(person), channel=self.dm_id(person)), repeat)

    def group(self, person: Person, text: str, *, expect: int = 1) -> Said:
        return self._deliver(slack_fake.message_channel(f"<@{slack_fake.BOT_USER_ID}> {text}",
                                                        user=self.user(person), channel=self.GROUP_ID), 1)

    def reply(self, person: Person, text: str, proposal_id: int) -> Said:
        question = next(post for post in self.server.posts if f"'{proposal_id}'" in str(post.get("blocks")))
        return self._deliver(slack_fake.message_im(text, user=self.user(person), channel=self.dm_id(person),
                                                   thread_ts=question["ts"],
                                                   parent_user_id=slack_fake.BOT_USER_ID), 1)

    def share_photo(self, person: Person, caption: str = "", *, in_group: bool = False) -> Said:
        where = ({"channel": self.GROUP_ID, "channel_type": "channel"} if in_group
                 else {"channel": self.dm_id(person), "channel_type": "im"})
        return self._deliver(slack_fake.message_event(caption, user=self.user(person), subtype="file_share",
                                                      files=[slack_fake.shared_file()], **where), 1)

    def remember(self, person: Person, fact: str, *, expect: int = 1, channel: str | None = None) -> Said:
        """Slack delivers a message that starts with a slash as the slash command it names (``channel``: where
        it is typed; ``person``'s direct chat with the bot by default)."""
        return self._command(person, "/remember", fact, channel=channel)

    def memory(self, person: Person) -> Said:
        return self._command(person, "/memory", "")

    def start_over(self, person: Person) -> Said:
        return self._command(person, "/new", "")

    def _command(self, person: Person, command: str, text: str, *, channel: str | None = None) -> Said:
        before = len(self.server.posts)
        self._responses = len(self.server.responses)
        signed = self.server.slash_command_request(command, text, user=self.user(person),
                                                   channel=channel or self.dm_id(person), signing_secret=self.secret)
        assert self.post(signed) == 200
        return self._said(before)

    def tap(self, person: Person, answer: str, proposal_id: int, *, expect: int = 1) -> Said:
        before = len(self.server.posts)
        self._responses = len(self.server.responses)
        signed = self.server.block_actions_request(f"memory_{answer}", str(proposal_id), signing_secret=self.secret,
                                                   user=self.user(person), channel=self.dm_id(person))
        assert self.post(signed) == 200
        return self._said(before)

    def tap_seen(self, person: Person, answer: str, proposal_id: int, *, in_group: bool = False) -> Tapped:
        before, responses = len(self.server.posts), len(self.server.responses)
        signed = self.server.block_actions_request(f"memory_{answer}", str(proposal_id), signing_secret=self.secret,
                                                   user=self.user(person),
                                                   channel=self.GROUP_ID if in_group else self.dm_id(person))
        assert self.post(signed) == 200
        tapped = Tapped(public=[post["text"] for post in self.server.posts[before:]])
        for response in self.server.responses[responses:]:
            if response.get("response_type") == "ephemeral":
                tapped.private.append(response.get("text", ""))
            elif response.get("replace_original") in (True, "true"):
                tapped.card.append(response.get("text", ""))
            else:
                tapped.public.append(response.get("text", ""))
        return tapped

    def dm_id(self, person: Person) -> str:
        return f"D{person.number}"

    def group_id(self) -> str:
        return self.GROUP_ID


# --------------------------------------------------------------------------------------------------------
# Discord: MESSAGE_CREATE / INTERACTION_CREATE over the gateway to the bot that runbridges runs
# --------------------------------------------------------------------------------------------------------


class DiscordDriver(Driver):
    platform = "discord"

    def __init__(self, server: DiscordServer, binding: Binding) -> None:
        self.server, self.binding = server, binding
        self.bridges = SupervisorThread(Supervisor(reload_seconds=0.2, binding_ids={binding.pk})).start()
        if not server.identified.wait(10):
            raise TimeoutError("the bot did not connect to the gateway")

    def close(self) -> None:
        self.bridges.stop()

    def _said(self, before: int, before_interactions: int) -> Said:
        messages = self.server.messages[before:]
        buttons = []
        for message in messages:
            for row in message.get("components") or []:
                for component in row.get("components", []):
                    _, answer, pid = component["custom_id"].split(":")
                    buttons.append((answer, int(pid)))
        # As Discord shows them: a note's "*" or "_" goes escaped (``\*``) and shows as typed.
        texts = [shown(m["content"]) for m in messages]
        texts += [shown(r["data"].get("content", ""))
                  for r in self.server.interaction_responses[before_interactions:]]
        return Said(texts, buttons)

    def _wait(self, before: int, before_interactions: int, expect: int) -> None:
        self.server.wait_for(
            lambda: len(self.server.messages) - before + len(self.server.interaction_responses)
            - before_interactions >= expect, timeout=15, message=f"expected {expect} answers from the bot")

    def dm(self, person: Person, text: str, *, expect: int = 1, repeat: int = 1) -> Said:
        before, interactions = len(self.server.messages), len(self.server.interaction_responses)
        payload = self.server.push_message(text, author_id=person.number, username=person.name.lower())
        for _ in range(repeat - 1):
            self.server.push_message(text, author_id=person.number, username=person.name.lower(),
                                     message_id=int(payload["id"]))
        self._wait(before, interactions, expect)
        return self._said(before, interactions)

    def group(self, person: Person, text: str, *, expect: int = 1) -> Said:
        before, interactions = len(self.server.messages), len(self.server.interaction_responses)
        self.server.push_message(f"<@{self.server.bot_id}> {text}", author_id=person.number,
                                 username=person.name.lower(), guild_id=self.server.guild_id)
        self._wait(before, interactions, expect)
        return self._said(before, interactions)

    def reply(self, person: Person, text: str, proposal_id: int) -> Said:
        question = next(m for m in self.server.messages if f"memory:yes:{proposal_id}" in str(m.get("components")))
        before, interactions = len(self.server.messages), len(self.server.interaction_responses)
        self.server.push_message(text, author_id=person.number, username=person.name.lower(), reply_to=question)
        self._wait(before, interactions, 1)
        return self._said(before, interactions)

    def share_photo(self, person: Person, caption: str = "", *, in_group: bool = False) -> Said:
        before, interactions = len(self.server.messages), len(self.server.interaction_responses)
        self.server.push_message(caption, author_id=person.number, username=person.name.lower(),
                                 guild_id=self.server.guild_id if in_group else None, attachments=[attachment()])
        self._wait(before, interactions, 1)
        return self._said(before, interactions)

    def tap(self, person: Person, answer: str, proposal_id: int, *, expect: int = 1) -> Said:
        before, interactions = len(self.server.messages), len(self.server.interaction_responses)
        self.server.push_button_click(f"memory:{answer}:{proposal_id}", author_id=person.number,
                                      username=person.name.lower())
        self._wait(before, interactions, expect)
        return self._said(before, interactions)

    def tap_seen(self, person: Person, answer: str, proposal_id: int, *, in_group: bool = False) -> Tapped:
        before, interactions = len(self.server.messages), len(self.server.interaction_responses)
        self.server.push_button_click(f"memory:{answer}:{proposal_id}", author_id=person.number,
                                      username=person.name.lower(),
                                      guild_id=self.server.guild_id if in_group else None)
        # Every click gets one interaction response (else Discord tells the clicker it failed).
        self.server.wait_for(lambda: len(self.server.interaction_responses) > interactions, timeout=15,
                             message="the click was not answered")
        tapped = Tapped()
        for response in self.server.interaction_responses[interactions:]:
            data = response["data"]
            content = shown(data.get("content") or "")
            if response["type"] == 7:  # the question message itself updated
                tapped.card.append(content)
            elif response["type"] == 4 and int(data.get("flags") or 0) & 64:  # ephemeral
                tapped.private.append(content)
            elif response["type"] == 4:
                tapped.public.append(content)
        for message in self.server.messages[before:]:
            flags = int((message.get("payload") or {}).get("flags") or 0)
            (tapped.private if flags & 64 else tapped.public).append(shown(message["content"]))
        return tapped

    def dm_id(self, person: Person) -> str:
        return str(self.server.dm_channel_id(person.number))

    def group_id(self) -> str:
        return str(self.server.channel_id)
