"""The proposals inbox: ``GET /api/chats/memory/proposals``, ``POST …/{id}/confirm``, ``POST …/{id}/reject``.

Thin views over ``memory.proposals``: another user's proposal is a 404, an expired one a 410, one decided
already a 409.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from localai_memory.core.api import ApiView, int_param, one_param
from localai_memory.notes.api import change_json

from . import policy, proposals
from .models import Proposal
from .providers import addon_label


def _message(proposal: Proposal, status: str) -> str:
    """Why it waits while it does (the policy's sentence for its reason); what became of it once decided."""
    if status == "pending":
        return policy.MESSAGES.get(proposal.reason, "")
    if status == "confirmed":
        if proposal.provider:
            return (f"Confirmed: handed to the memory add-on \u201c{addon_label(proposal.provider)}\u201d"
                    + (" to forget." if proposal.is_delete else "."))
        return "Confirmed: forgotten." if proposal.is_delete else "Confirmed: saved to memory."
    if status == "rejected":
        return proposals.rejected_text(proposal)
    from localai_memory.growth.consolidation import REPLACED_BY_NEWER

    if proposal.decided_by == REPLACED_BY_NEWER:
        return "Replaced by a newer suggestion."
    return proposals.DROPPED_BECAUSE.get(proposal.decided_by, "Expired: nobody answered within 24 hours.")


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    scope = proposals.proposal_scope(proposal)
    status = proposals.proposal_status(proposal)
    # A note for a memory add-on goes to that add-on, which keeps its notes itself: no path of the built-in
    # notes, and the scope's label says whose add-on notes.
    addon = proposal.provider or None
    scope_label = f"{scope.label} in the memory add-on {addon_label(addon)}" if addon else scope.label
    return {
        "id": proposal.pk,
        "status": status,
        "kind": proposal.kind,
        "source": proposal.source,
        "topic": proposal.topic,
        "summary": proposal.summary,
        "details": proposal.details or None,
        "delete": proposal.is_delete,
        # The note as the person last saw it here: when proposed, or as a refused confirm showed it.
        "current": dict(zip(("summary", "details"), (text or None for text in proposal.shown_before),
                            strict=True)),
        "scope": {"kind": scope.kind, "key": scope.key, "label": scope_label},
        # The memory add-on the note goes to (its name); null: the built-in notes, at ``path``.
        "provider": addon,
        "path": None if addon else scope.topic_path(proposal.topic),
        "index_path": None if addon else scope.index_path,
        "locked": proposal.locked,
        "requester_only": proposal.requester_only,
        "reason": proposal.reason,
        "message": _message(proposal, status),
        "origin": proposal.origin,
        "chat_id": proposal.chat_id,
        "created_at": proposal.created_at.isoformat(),
        "expires_at": proposal.expires_at.isoformat(),
        "decided_at": proposal.decided_at.isoformat() if proposal.decided_at else None,
        "decided_by": proposal.decided_by or None,
        "change_id": proposal.change_set_id,
        # A delete that makes room in a full index: the note ({topic, summary, details}) suggested once it is
        # confirmed; else null.
        "makes_room_for": _room_for(proposal),
        # The importance (0..1) the note takes when confirmed, as an export gave it (an import's); else null.
        "importance": proposal.importance,
    }


def _room_for(proposal: Proposal) -> dict[str, str] | None:
    fact = proposal.makes_room_for
    if not isinstance(fact, dict) or not fact.get("topic"):
        return None
    return {key: str(fact.get(key) or "") for key in ("topic", "summary", "details")}


#: the most proposals one page lists (and how many when ``limit`` is left out, as before pages existed)
PAGE_MAX = 500


class ProposalsApi(ApiView):
    @extend_schema(parameters=[OpenApiParameter("status", OpenApiTypes.STR, OpenApiParameter.QUERY,
                                                enum=[*proposals.STATUSES, "all"],
                                                description="Default pending (those that can still be "
                                                            "confirmed)."),
                               OpenApiParameter("limit", OpenApiTypes.INT, OpenApiParameter.QUERY,
                                                description=f"At most this many (1-{PAGE_MAX}, default {PAGE_MAX})."),
                               OpenApiParameter("before", OpenApiTypes.INT, OpenApiParameter.QUERY,
                                                description="The next_before of the page read last.")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """The inbox: notes that wait for your confirmation (or, with ?status=, the decided ones), newest
        first, ``limit`` at a time; ``next_before`` (null on the last page) is the ``before`` that reads the
        page after this one, as in the audit of changes."""
        status = one_param(request, "status", "pending")
        limit = int_param(request, "limit", default=PAGE_MAX, max_value=PAGE_MAX) or PAGE_MAX
        before = int_param(request, "before")
        page = list(proposals.proposal_list(owner_id=request.user.pk, status=status, before=before)[:limit + 1])
        more = len(page) > limit
        page = page[:limit]
        return Response({"proposals": [proposal_json(p) for p in page],
                         "next_before": page[-1].pk if more else None})


class ProposalApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, proposal_id: int):
        """One proposal."""
        return Response(proposal_json(proposals.access_proposal(request.user, proposal_id)))


class ProposalConfirmApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, proposal_id: int):
        """Save the proposed note (one change set you can undo). 410 once expired, 409 if decided."""
        proposal = proposals.access_proposal(request.user, proposal_id)
        proposal, change = proposals.proposal_confirm_read(owner_id=request.user.pk, proposal_id=proposal.pk,
                                                           actor="you")
        return Response({"proposal": proposal_json(proposal), "change": change_json(change) if change else None})


class ProposalRejectApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, proposal_id: int):
        """Drop the proposed note; nothing is written. 410 once expired, 409 if decided."""
        proposal = proposals.access_proposal(request.user, proposal_id)
        proposal = proposals.proposal_reject(owner_id=request.user.pk, proposal_id=proposal.pk, actor="you")
        return Response({"proposal": proposal_json(proposal)})
