"""The chat page's "used N memories" chip names the topics recall put in front of the model, and says so
when recall could only match words."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.chats.helpers import new_chat, send

pytestmark = pytest.mark.django_db


def chip_of(owner, chat_id: int) -> str:
    client = Client()
    client.force_login(owner)
    html = client.get(f"/chats/{chat_id}/").content.decode()
    match = re.search(r'<li class="memory-report".*?</details>', html, flags=re.DOTALL)
    assert match, html
    return match.group(0)


def test_the_chip_lists_the_recalled_topics(api, owner, model, alices_notes):
    chat = new_chat(api)
    send(api, chat, "Which neighbourhood do I live in now?")
    chip = chip_of(owner, chat)
    assert "used 2 memories" in chip  # the index, and the topic recall brought in
    assert "“home” recalled from your notes" in chip
    assert 'href="/files/open/?path=Memory/home.md"' in chip
    assert 'data-testid="recall-degraded"' not in chip


def test_the_chip_says_when_recall_matched_words_only(api, owner, model, embeddings_off, alices_notes):
    embeddings_off()
    chat = new_chat(api)
    send(api, chat, "Tell me about my dog Rex.")
    chip = chip_of(owner, chat)
    assert "“pets” recalled from your notes" in chip
    assert "No embedding model is set up, so recall matched words only." in chip
