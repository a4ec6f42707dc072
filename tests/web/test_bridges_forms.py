"""The Bridges page's forms without a browser: an edit passes on only what changed (a blank credential keeps
the stored one, so the bot is not reconnected), is refused as the API refuses it, and another user's bot or
sender is a 404."""

from __future__ import annotations

import pytest

from bridges import services
from bridges.models import Binding, Sender
from bridges.selectors import binding_credentials
from tests.web.conftest import signed_in

pytestmark = pytest.mark.django_db

TOKEN = "123456:ALICE-TOKEN-abcd"


@pytest.fixture
def alices_bot(owner) -> Binding:
    return services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot", mode="polling",
                                   credentials={"token": TOKEN})


def _blocked(binding: Binding) -> Sender:
    sender = services.sender_seen(binding_id=binding.pk, external_id="77", display="Stranger")
    services.pairing_offer(sender=sender)
    return services.pairing_deny(request=sender.pairing_requests.get())


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_renaming_a_bot_keeps_its_stored_credentials_so_it_is_not_reconnected(owner, alices_bot):
    response = signed_in(owner).post(f"/bridges/{alices_bot.pk}/edit/",
                                     {"name": "Kitchen bot", "mode": "polling", "agent": "", "token": ""}, follow=True)

    stored = Binding.objects.get(pk=alices_bot.pk)
    assert _messages(response) == ["Saved “Kitchen bot”."]
    assert stored.name == "Kitchen bot"
    assert stored.credentials == alices_bot.credentials  # not even encrypted again: the same connection


def test_a_malformed_token_or_another_platforms_mode_is_refused_and_nothing_changes(owner, alices_bot):
    client = signed_in(owner)

    bad_token = client.post(f"/bridges/{alices_bot.pk}/edit/", {"name": "Family bot", "token": "no spaces allowed"},
                            follow=True)
    slack_mode = client.post(f"/bridges/{alices_bot.pk}/edit/", {"name": "Family bot", "mode": "socket"},
                             follow=True)

    assert _messages(bad_token) == ["credentials.token: a bot token is 8-300 letters, digits and . : _ -"]
    assert _messages(slack_mode) == ["a telegram binding runs in one of these modes: polling, webhook"]
    stored = Binding.objects.get(pk=alices_bot.pk)
    assert (stored.mode, stored.credentials) == ("polling", alices_bot.credentials)
    assert binding_credentials(binding=stored)["token"] == TOKEN


def test_another_users_bot_or_sender_is_not_found(outsider, alices_bot):
    stranger = _blocked(alices_bot)
    mallory = signed_in(outsider)

    edit = mallory.post(f"/bridges/{alices_bot.pk}/edit/", {"name": "Mine now", "token": "999999:MALLORY-TOKEN"})
    unblock = mallory.post(f"/bridges/senders/{stranger.pk}/unblock/")

    assert (edit.status_code, unblock.status_code) == (404, 404)
    stored = Binding.objects.get(pk=alices_bot.pk)
    assert (stored.name, stored.credentials) == ("Family bot", alices_bot.credentials)
    assert Sender.objects.get(pk=stranger.pk).status == "blocked"


def test_unblocking_a_sender_who_is_not_blocked_says_so(owner, alices_bot):
    sender = services.sender_seen(binding_id=alices_bot.pk, external_id="42", display="Grandma")

    response = signed_in(owner).post(f"/bridges/senders/{sender.pk}/unblock/", follow=True)

    assert _messages(response) == ["Grandma is not blocked."]
