"""A screen reader is told what htmx brought: a reply, a note proposed or saved. The parts htmx replaces (the
conversation, a card) cannot be live regions themselves, so one region outside them, on every page, says it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from localai_memory.chats.services import chat_create
from localai_memory.memory import proposals as proposal_services
from tests.fakes.openai_server import reply, tool_calls

from .conftest import signed_in

PROPOSE_HOME = ("propose_change", {"kind": "memory", "topic": "home", "summary": "lives in Rome"})


@pytest.mark.browser
def test_the_reply_a_proposal_and_its_answer_are_announced_outside_what_htmx_replaces(web, model):
    web.register("alice")
    page = web.page
    web.go("/chats/")
    page.get_by_role("button", name="New chat").click()
    announce = page.locator("#announce")
    expect(announce).to_have_attribute("role", "status")
    expect(page.locator("#conversation #announce, .proposal-card #announce")).to_have_count(0)
    model.script(tool_calls(PROPOSE_HOME), reply("I can keep that note once you confirm it."))

    page.get_by_role("textbox", name="Message").fill("Remember that I live in Rome.")
    page.get_by_role("button", name="Send").click()

    expect(announce).to_have_text("The assistant answered: I can keep that note once you confirm it. It proposes a "
                                  "note to save, “home”: Save or Don't save.")
    web.accessible("chat with the reply announced")
    page.get_by_role("article", name="Save to memory: “home”").get_by_role("button", name="Save the note home", exact=True).click()
    expect(announce).to_have_text("Saved to memory: “home”.")
    expect(page.locator("#announce")).to_have_count(1)


@pytest.mark.browser
def test_dont_save_in_the_inbox_is_announced(web, model):
    web.register("alice")
    page = web.page
    web.go("/chats/")
    page.get_by_role("button", name="New chat").click()
    model.script(tool_calls(PROPOSE_HOME), reply("Noted, if you want."))
    page.get_by_role("textbox", name="Message").fill("I live in Rome.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.assistant")).to_have_count(1)
    web.go("/inbox/")

    page.get_by_role("article", name="Save to memory: “home”").get_by_role("button", name="Don't save").click()

    expect(page.locator("#announce")).to_have_text("Dropped: “home”.")


def test_an_htmx_reply_and_a_card_answer_carry_the_announcement(owner, model):
    chat = chat_create(owner_id=owner.pk)
    client = signed_in(owner)
    model.script(tool_calls(PROPOSE_HOME), reply("Noted, if you want."))

    sent = client.post(f"/chats/{chat.pk}/send/", {"content": "I live in Rome."}, HTTP_HX_REQUEST="true")

    assert ('<div id="announce" hx-swap-oob="innerHTML">The assistant answered: Noted, if you want. It proposes a '
            "note to save, “home”: Save or Don&#x27;t save.</div>") in sent.content.decode()
    proposal = proposal_services.proposal_list(owner_id=owner.pk).get()
    saved = client.post(f"/inbox/{proposal.pk}/confirm/", {"next": f"/chats/{chat.pk}/"}, HTTP_HX_REQUEST="true")
    assert '<div id="announce" hx-swap-oob="innerHTML">Saved to memory: “home”.</div>' in saved.content.decode()


def test_a_note_handed_to_a_memory_addon_is_announced_as_handed_over_not_saved(owner, monkeypatch):
    import sample_memory_provider

    from localai_memory.memory import proposals
    from localai_memory.memory.services import provider_pick

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, {})
    provider_pick(user_id=owner.pk, provider="sample")
    waiting = proposals.addon_proposal_create(owner_id=owner.pk, provider="sample", topic="kite",
                                              summary="flies a red kite")

    answered = signed_in(owner).post(f"/inbox/{waiting.pk}/confirm/", {"next": "/inbox/"}, HTTP_HX_REQUEST="true")

    assert ('<div id="announce" hx-swap-oob="innerHTML">Handed to the memory add-on: “kite”.</div>'
            in answered.content.decode())
    assert sample_memory_provider.NOTES[owner.pk] == {"kite": "flies a red kite"}


def test_dont_save_and_keep_it_say_dropped_and_kept_on_the_card_and_the_page(owner, db):
    """A no is "Dropped" on the card, in its announcement and in the page's message after a plain form post, as
    the API, the bots and the terminal say it; a note to forget answered no is "Kept", one answered yes
    "Forgotten" (the page said "Saved to memory" of a note it had just forgotten)."""
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    for topic in ("home", "work", "pets"):
        note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=topic, summary=f"{topic} note", source="files",
                    actor="you")
    client = signed_in(owner)
    save = proposal_services.proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegan")
    card = client.post(f"/inbox/{save.pk}/reject/", {"next": "/inbox/"}, HTTP_HX_REQUEST="true").content.decode()
    assert '<p role="status">Dropped.</p>' in card
    assert '<div id="announce" hx-swap-oob="innerHTML">Dropped: “diet”.</div>' in card

    said = []
    for answer, topic in (("reject", "diet-2"), ("reject", "home"), ("confirm", "work")):
        proposal = proposal_services.proposal_create(owner_id=owner.pk, scope=Scope.user(), topic=topic,
                                                     summary="" if topic in ("home", "work") else "vegan too",
                                                     delete=topic in ("home", "work"))
        page = client.post(f"/inbox/{proposal.pk}/{answer}/", {"next": "/inbox/"}, follow=True)
        said += [str(m) for m in page.context["messages"]]
    assert said == ["Dropped: diet-2.", "Kept: home.", "Forgotten: work."]
