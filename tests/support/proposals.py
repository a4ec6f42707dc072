"""Proposals made in bulk, for the listings that page them (the inbox API, the terminal's ``proposals``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from localai_memory.memory.models import Proposal


def decided_proposals(owner: Any, count: int) -> list[int]:
    """``count`` of ``owner``'s proposals answered already (turned down), a minute apart; their ids, newest
    first (the order every listing of them has)."""
    now = timezone.now()
    rows = Proposal.objects.bulk_create([
        Proposal(owner=owner, status=Proposal.Status.REJECTED, scope_kind="user", topic=f"t{n}",
                 summary=f"fact {n}", fingerprint=f"decided-{n}", created_at=now - timedelta(minutes=n),
                 expires_at=now + timedelta(hours=24), decided_at=now, decided_by="you") for n in range(count)])
    return [row.pk for row in rows]
