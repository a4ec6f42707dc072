"""Bridges: connect a bot, approve a pairing, give the permission "Confirm changes from the chat", switch off."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bridges.models import Binding
from bridges.services import pairing_offer, sender_seen

pytestmark = pytest.mark.browser


def test_a_bot_is_connected_and_a_sender_is_paired_with_the_permission_to_confirm(web):
    web.register("alice")
    page = web.page
    web.go("/bridges/")
    expect(page.get_by_text("No bots yet — connect one below")).to_be_visible()
    page.get_by_text("Connect a bot", exact=True).click()
    page.get_by_label("Name").fill("Family bot")
    page.get_by_label("Platform").select_option("telegram")
    page.get_by_label("Bot token (Telegram, Discord)").fill("123456:ABCdefGHIjkl")
    page.get_by_role("button", name="Connect").click()
    expect(page.get_by_text("Connected the bot “Family bot”.")).to_be_visible()
    card = page.locator("section[data-binding]")
    expect(card.get_by_role("heading", name="Family bot")).to_be_visible()
    expect(card).to_contain_text("Telegram")
    expect(card).not_to_contain_text("123456:ABCdefGHIjkl")  # credentials are never shown back

    # Somebody writes to the bot and gets a pairing code.
    binding = Binding.objects.get(name="Family bot")
    sender = sender_seen(binding_id=binding.pk, external_id="42", display="Grandma")
    offer = pairing_offer(sender=sender)
    page.reload()
    expect(card).to_contain_text(f"Grandma asked with code {offer.code}")
    web.accessible("bridges with a pairing request")
    card.get_by_label("Confirm changes from the chat").check()
    card.get_by_role("button", name="Approve Grandma").click()
    expect(page.get_by_text("Paired Grandma.")).to_be_visible()
    row = card.get_by_role("row", name="Grandma")
    expect(row).to_contain_text("Paired")
    expect(row).to_contain_text("Yes")
    row.get_by_role("button", name="Take back from Grandma").click()
    expect(page.get_by_text("Grandma cannot confirm changes from the chat now.")).to_be_visible()
    expect(card.get_by_role("row", name="Grandma")).to_contain_text("No")

    # The owner's switch turns the bot off.
    card.get_by_role("switch", name="Family bot on").click()
    expect(card.get_by_role("switch", name="Family bot on")).to_have_attribute("aria-checked", "false")
    expect(card).to_contain_text("Off: the bot does not answer.")
    binding.refresh_from_db()
    assert binding.enabled is False
