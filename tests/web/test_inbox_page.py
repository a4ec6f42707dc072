"""The inbox's server output, read with Django's test client: its sections and what each card says."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from localai_memory.memory.proposals import proposal_create
from localai_memory.memory.services import memory_forget_all
from localai_memory.notes.paths import Scope

from .conftest import signed_in

pytestmark = pytest.mark.django_db


def headings(html: str) -> list[str]:
    return re.findall(r"<h2 [^>]*>([^<]*)</h2>", html)


def test_suggestions_dropped_by_forget_everything_are_listed_as_dropped_not_as_expired(owner):
    proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Lisbon")
    memory_forget_all(user_id=owner.pk)
    with time_machine.travel(timezone.now() - timedelta(days=2), tick=False):
        proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="pets", summary="a cat")  # its 24 hours ran out

    html = signed_in(owner).get("/inbox/").content.decode()

    assert headings(html)[-2:] == ["Dropped", "Expired"]
    dropped, expired = html.split('id="dropped-title"')[1].split('id="expired-title"')
    assert "“home”" in dropped and "Dropped: everything in memory was forgotten" in dropped
    assert "“pets”" in expired and "“home”" not in expired
