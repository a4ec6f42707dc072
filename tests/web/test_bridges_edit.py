"""Bridges: a bot's token, mode, agent and name are changed in place (its senders, conversations and notes
stay), its credentials never shown back; the address the platform calls is shown; a denied sender is
unblocked."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from bridges import services
from bridges.models import Binding, Sender
from bridges.selectors import binding_credentials
from localai_memory.agents.models import Agent
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert

pytestmark = pytest.mark.browser

OLD_TOKEN = "123456:OLD-TOKEN-abcdef"
NEW_TOKEN = "123456:NEW-TOKEN-ghijkl"


def _paired(binding: Binding, external_id: str, name: str) -> Sender:
    sender = services.sender_seen(binding_id=binding.pk, external_id=external_id, display=name)
    offer = services.pairing_offer(sender=sender)
    assert offer.code is not None
    return services.pairing_approve(binding=binding, code=offer.code, can_confirm=True)


def test_a_refused_token_is_replaced_on_the_page_and_the_bot_keeps_its_senders_and_notes(web):
    web.register("alice")
    alice = get_user_model().objects.get(username="alice")
    binding = services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot", mode="polling",
                                      credentials={"token": OLD_TOKEN})
    grandma = _paired(binding, "42", "Grandma")
    scope = Scope.channel(binding.pk, "42")
    note_upsert(owner_id=alice.pk, scope=scope, topic="home", summary="Lives in Rome", source="files", actor="you")
    services.binding_report_revoked(binding_id=binding.pk, code="token_revoked",
                                    reason="Telegram refused the bot's token (revoked or wrong), so this binding "
                                           "was turned off. Enter a new token, then turn it on again.")
    page = web.go("/bridges/")
    card = page.locator(f"section[data-binding='{binding.pk}']")
    expect(card).to_contain_text("Enter a new token, then turn it on again.")

    token = card.get_by_label("Bot token", exact=True)  # the Edit form is open for a refused token
    expect(token).to_be_visible()
    expect(token).to_have_value("")  # write-only: never shown back
    expect(token).to_have_attribute("type", "password")
    web.accessible("bridges with a bot whose token was refused")
    web.screenshot("refused")
    token.fill(NEW_TOKEN)
    card.get_by_role("button", name="Save Family bot").click()

    expect(page.get_by_text("Saved “Family bot”. Turn it on to start it.")).to_be_visible()
    expect(card).not_to_contain_text("Token refused")
    assert NEW_TOKEN not in page.content() and OLD_TOKEN not in page.content()
    card.get_by_role("switch", name="Family bot on").click()
    expect(card.get_by_role("switch", name="Family bot on")).to_have_attribute("aria-checked", "true")
    stored = Binding.objects.get(pk=binding.pk)  # the same bot: nobody pairs again, the notes are its own
    assert (stored.enabled, stored.state) == (True, "ok")
    assert binding_credentials(binding=stored)["token"] == NEW_TOKEN
    assert Sender.objects.get(pk=grandma.pk).paired
    assert "Lives in Rome" in notes_selectors.index_text(owner_id=alice.pk, scope=scope)


def test_a_slack_bots_mode_agent_and_name_are_changed_and_its_request_url_is_shown(web, settings):
    settings.PUBLIC_URL = "https://memory.example.org"
    web.register("alice")
    alice = get_user_model().objects.get(username="alice")
    chef = Agent.objects.create(owner=alice, name="Chef", instructions="You cook.")
    binding = services.binding_create(owner_id=alice.pk, platform="slack", name="Team bot", mode="socket",
                                      credentials={"bot_token": "xoxb-alice-1", "app_token": "xapp-alice-1"})
    page = web.go("/bridges/")
    card = page.locator(f"section[data-binding='{binding.pk}']")
    expect(card).not_to_contain_text("Request URL")  # Socket Mode: Slack calls nobody

    card.locator("summary", has_text="Edit").click()
    card.get_by_label("Mode", exact=True).select_option("http")
    card.get_by_role("button", name="Save Team bot").click()
    expect(page.get_by_text("mode http needs the credentials signing_secret")).to_be_visible()
    assert Binding.objects.get(pk=binding.pk).mode == "socket"  # refused as the API refuses it

    card.locator("summary", has_text="Edit").click()
    card.get_by_label("Name", exact=True).fill("Kitchen bot")
    card.get_by_label("Mode", exact=True).select_option("http")
    card.get_by_label("Agent that answers").select_option(label="Chef")
    card.get_by_label("Signing secret (Events API)").fill("slack-signing-secret-1")
    card.get_by_role("button", name="Save Team bot").click()

    expect(page.get_by_text("Saved “Kitchen bot”. It reconnects within a minute.")).to_be_visible()
    events = f"https://memory.example.org/bridges/slack/{binding.pk}/events"
    expect(card.locator("[data-endpoint]")).to_have_text(events)
    expect(card).to_contain_text("Slack: Events API to this server · agent Chef")
    web.accessible("bridges with a Slack bot's Request URL")
    stored = Binding.objects.get(pk=binding.pk)
    assert (stored.name, stored.mode, stored.agent_id) == ("Kitchen bot", "http", chef.pk)
    assert binding_credentials(binding=stored) == {"bot_token": "xoxb-alice-1", "app_token": "xapp-alice-1",
                                                   "signing_secret": "slack-signing-secret-1"}
    assert "slack-signing-secret-1" not in page.content()


def test_a_denied_sender_is_unblocked_from_the_page(web, settings):
    settings.PUBLIC_URL = "https://memory.example.org"
    web.register("alice")
    alice = get_user_model().objects.get(username="alice")
    binding = services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot", mode="webhook",
                                      credentials={"token": OLD_TOKEN})
    stranger = services.sender_seen(binding_id=binding.pk, external_id="77", display="Stranger")
    services.pairing_offer(sender=stranger)
    page = web.go("/bridges/")
    card = page.locator(f"section[data-binding='{binding.pk}']")
    card.get_by_role("button", name="Deny Stranger").click()
    expect(card.get_by_role("row", name="Stranger")).to_contain_text("Pairing denied")
    expect(card.locator("[data-endpoint]")).to_have_text(
        f"https://memory.example.org/bridges/telegram/{binding.pk}/webhook")  # runbridges registers it

    card.get_by_role("button", name="Unblock Stranger").click()

    expect(page.get_by_text("Unblocked Stranger: when they write to the bot again, they get a new pairing "
                            "code.")).to_be_visible()
    expect(card.get_by_role("row", name="Stranger")).to_contain_text("Not paired")
    expect(card.get_by_role("button", name="Unblock Stranger")).to_have_count(0)
    assert Sender.objects.get(pk=stranger.pk).status == "unpaired"
