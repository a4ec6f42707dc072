"""Fixtures of the bridge tests: a bot binding per platform wired to its loopback server, the people who
write to it, and helpers that pair them through the project's own services.

The bridges hand blocking work to worker threads (each with its own database connection), so these tests
use the transactional database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bridges import services
from bridges.models import Binding, Sender
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import Scope
from tests.bridges.drivers import DiscordDriver, Driver, Person, SlackDriver, TelegramDriver
from tests.chats.helpers import model  # noqa: F401  (the model fixture)

SLACK_SECRET = "loopback-signing-secret-1"
TELEGRAM_TOKEN = "123456:LOOPBACK-TOKEN-telegram"
DISCORD_TOKEN = "loopback.discord.token"

ALICE = Person(5550001, "Alice")
BOB = Person(5550002, "Bob")
CAROL = Person(5550003, "Carol")


@pytest.fixture
def alice() -> Person:
    return ALICE


@pytest.fixture
def bob() -> Person:
    return BOB


@pytest.fixture
def carol() -> Person:
    """Somebody the owner never paired."""
    return CAROL


@pytest.fixture(autouse=True)
def quick_retries(settings):
    settings.BRIDGES_RETRY_BASE_SECONDS = 0.01
    settings.BRIDGES_TELEGRAM_POLL_TIMEOUT = 1


@pytest.fixture
def telegram_bot(owner, telegram_server, settings, model) -> Iterator[TelegramDriver]:  # noqa: F811
    settings.TELEGRAM_API_BASE_URL = telegram_server.origin
    binding = services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot", mode="webhook",
                                      credentials={"token": TELEGRAM_TOKEN})
    yield TelegramDriver(telegram_server, binding)


@pytest.fixture
def slack_bot(owner, slack_server, settings, model) -> Iterator[SlackDriver]:  # noqa: F811
    settings.SLACK_API_BASE_URL = slack_server.url
    settings.BRIDGES_SLACK_PROCESS_BEFORE_RESPONSE = True
    binding = services.binding_create(owner_id=owner.pk, platform="slack", name="Team bot", mode="http",
                                      credentials={"bot_token": "xoxb-loopback", "signing_secret": SLACK_SECRET})
    yield SlackDriver(slack_server, binding, SLACK_SECRET)


@pytest.fixture
def discord_bot(owner, discord_server, settings, model) -> Iterator[DiscordDriver]:  # noqa: F811
    settings.DISCORD_API_BASE_URL = discord_server.url
    settings.DISCORD_GATEWAY_URL = discord_server.gateway_url
    binding = services.binding_create(owner_id=owner.pk, platform="discord", name="Guild bot",
                                      credentials={"token": DISCORD_TOKEN})
    driver = DiscordDriver(discord_server, binding)
    yield driver
    driver.close()


@pytest.fixture(params=["telegram", "slack", "discord"])
def bot(request) -> Driver:
    """One bot per platform: every scenario runs through each platform's real library."""
    return request.getfixturevalue(f"{request.param}_bot")


def sender_key(bot: Driver, person: Person) -> str:
    return SlackDriver.user(person) if bot.platform == "slack" else str(person.number)


def pair(bot: Driver, person: Person, *, can_confirm: bool = True) -> Sender:
    """Pair ``person`` as the owner would: they got a code, the owner approved it."""
    sender = services.sender_seen(binding_id=bot.binding.pk, external_id=sender_key(bot, person),
                                  display=person.name)
    offer = services.pairing_offer(sender=sender)
    assert offer.code is not None
    return services.pairing_approve(binding=Binding.objects.get(pk=bot.binding.pk), code=offer.code,
                                    can_confirm=can_confirm)


def dm_scope(bot: Driver, person: Person) -> Scope:
    """The notes of ``person``'s direct chat with the bot: Memory/channels/<binding>-<hash>/."""
    return Scope.channel(bot.binding.pk, bot.dm_id(person))


def group_scope(bot: Driver) -> Scope:
    return Scope.channel(bot.binding.pk, bot.group_id())


def notes_of(owner, scope: Scope) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=scope)
