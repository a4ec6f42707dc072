"""A model server that is rate limiting (429) is not "could not answer": on each platform through its real
library, the bot says the model is busy and when to send the message again, from the server's Retry-After."""

from __future__ import annotations

import pytest

from bridges import core
from tests.bridges.conftest import pair
from tests.fakes._loopback import Response
from tests.fakes.openai_server import reply

pytestmark = pytest.mark.django_db(transaction=True)


def rate_limited(retry_after: str) -> Response:
    return Response(status=429, body=b'{"error": {"message": "too many requests", "type": "rate_limit_exceeded"}}',
                    headers={"Content-Type": "application/json", "Retry-After": retry_after})


def test_a_busy_model_says_so_and_when_to_try_again(bot, model, alice):
    pair(bot, alice)
    model.script(rate_limited("20"))

    said = bot.dm(alice, "Are you there?")

    assert said.texts == [("Sorry, the model is busy with other requests just now. Please send your message again "
                           "in about 20 seconds.")]
    assert core.ERROR_TEXT not in said.text
    model.script(reply("Here now."))
    assert bot.dm(alice, "Are you there?").texts == ["Here now."]


@pytest.mark.parametrize(("retry_after", "wait"), [("1", "1 second"), ("", "5 seconds"),
                                                   ("Wed, 21 Oct 2026 07:28:00 GMT", "5 seconds"),
                                                   ("150", "3 minutes"), ("7200", "2 hours")])
def test_the_wait_is_said_in_words(telegram_bot, model, alice, retry_after, wait):
    pair(telegram_bot, alice)
    model.script(rate_limited(retry_after))

    said = telegram_bot.dm(alice, "Are you there?")

    assert said.text.endswith(f"Please send your message again in about {wait}.")
