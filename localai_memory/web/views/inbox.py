"""The inbox: every proposal waiting for you, from any chat or bot; confirm or reject; expired ones greyed.

The proposal card here is the same one the chat shows, so a note can be confirmed in either place; the row
lock in ``memory.proposals`` makes sure it is saved once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from bridges import selectors as bridge_selectors
from localai_memory.agents.selectors import agent_names
from localai_memory.core.errors import ApplicationError, NotFound
from localai_memory.growth.consolidation import REPLACED_BY_NEWER
from localai_memory.memory import policy
from localai_memory.memory import proposals as proposal_services
from localai_memory.memory.models import Proposal
from localai_memory.memory.providers import addon_label
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet

from .common import (
    AuthenticatedHttpRequest,
    back,
    flash,
    flash_error,
    int_or_404,
    is_htmx,
    not_found_as_404,
    page,
)
from .memory import conversation_titles

EXPIRED_SHOWN = 20


def inbox_pending_count(user_id: int) -> int:
    return proposal_services.proposal_list(owner_id=user_id, status="pending").count()


@dataclass
class ProposalView:
    """A proposal as a card shows it."""

    proposal: Proposal
    status: str  # pending, confirmed, rejected, expired (a pending one past its life is expired)
    scope_label: str
    origin_label: str
    chat_url: str | None
    reason_message: str
    change: ChangeSet | None
    undo_open: bool

    @property
    def pk(self) -> int:
        return self.proposal.pk

    @property
    def expires_at(self) -> datetime:
        return self.proposal.expires_at

    @property
    def dropped(self) -> str:
        """Why it ended before its time (everything forgotten, its agent or bot deleted), else ""."""
        return proposal_services.DROPPED_BECAUSE.get(self.proposal.decided_by, "")

    @property
    def replaced(self) -> bool:
        """Whether a newer suggestion that holds its lines too took its place."""
        return self.status == "expired" and self.proposal.decided_by == REPLACED_BY_NEWER


def scope_label(kind: str, key: str, names: dict[str, str], conversations: dict[str, str] | None = None) -> str:
    if kind == "user":
        return "your notes"
    if kind == "agent":
        name = names.get(key)
        return f"the notes of the agent “{name}”" if name else f"the notes of a deleted agent ({key})"
    title = (conversations or {}).get(key)
    return f"the notes of the conversation {title}" if title else f"the notes of the conversation {key}"


def origin_label(proposal: Proposal, chat_titles: dict[int, str], senders: dict[int, str]) -> str:
    source = proposal.get_source_display()
    if proposal.origin == "messaging":
        where = "a messaging app"
        if proposal.chat_id in chat_titles:
            where = f"the messaging chat “{chat_titles[proposal.chat_id]}”"
        asked = senders.get(proposal.requested_by_sender_id or 0)
        return f"Proposed in {where}" + (f", asked by {asked}" if asked else "")
    if proposal.chat_id is not None and proposal.reason != "unused":  # a note nobody needs: no chat's idea
        title = chat_titles.get(proposal.chat_id)
        return f"Proposed in the chat “{title}”" if title else "Proposed in a chat you deleted"
    return f"From: {source}"


def chat_titles(owner_id: int, chat_ids: set[int]) -> dict[int, str]:
    if not chat_ids:
        return {}
    from localai_memory.chats.selectors import chat_list

    return {chat.pk: str(chat) for chat in chat_list(owner_id=owner_id).filter(pk__in=chat_ids)}


def sender_labels(owner_id: int, sender_ids: set[int]) -> dict[int, str]:
    """Who asked, for proposals from a messaging app (only the owner's own bots' senders)."""
    labels: dict[int, str] = {}
    for sender_id in sender_ids:
        try:
            labels[sender_id] = bridge_selectors.access_sender(owner_id, sender_id).label
        except NotFound:
            continue
    return labels


def proposal_views(owner_id: int, proposals: list[Proposal]) -> list[ProposalView]:
    names = agent_names(owner_id)
    titles = chat_titles(owner_id, {p.chat_id for p in proposals if p.chat_id is not None})
    conversations = conversation_titles(owner_id) if any(p.scope_kind == "channel" for p in proposals) else {}
    senders = sender_labels(owner_id, {p.requested_by_sender_id for p in proposals
                                       if p.origin == "messaging" and p.requested_by_sender_id})
    now = timezone.now()
    views = []
    for proposal in proposals:
        status = proposal_services.proposal_status(proposal, now=now)
        change = proposal.change_set if status == Proposal.Status.CONFIRMED else None
        where = scope_label(proposal.scope_kind, proposal.scope_key, names, conversations)
        if proposal.provider:  # the memory add-on keeps the note, not the built-in notes
            where = f"{where} in the memory add-on “{addon_label(proposal.provider)}”"
        views.append(ProposalView(
            proposal=proposal,
            status=status,
            scope_label=where,
            origin_label=origin_label(proposal, titles, senders),
            chat_url=f"/chats/{proposal.chat_id}/" if proposal.chat_id in titles else None,
            reason_message=policy.MESSAGES.get(proposal.reason, ""),
            change=change,
            undo_open=bool(change is not None and not change.reverted_by.exists()),
        ))
    return views


@login_required
@require_GET
def inbox(request: AuthenticatedHttpRequest) -> HttpResponse:
    pending = list(proposal_services.proposal_list(owner_id=request.user.pk, status="pending")
                   .select_related("change_set").order_by("expires_at", "id"))
    ended = proposal_views(request.user.pk, list(
        proposal_services.proposal_list(owner_id=request.user.pk, status="expired")
        .order_by("-expires_at", "-id")[:EXPIRED_SHOWN]))
    return page(request, "web/inbox.html", {
        "pending": proposal_views(request.user.pk, pending),
        # Ended before their time (everything forgotten, their agent, bot or chat deleted, a newer suggestion):
        # not "expired", which says the 24 hours ran out.
        "dropped": [view for view in ended if view.dropped or view.replaced],
        "expired": [view for view in ended if not (view.dropped or view.replaced)],
    }, section="inbox")


def _card(request: AuthenticatedHttpRequest, proposal_id: int, *, status: int = 200,
          error: str | None = None) -> HttpResponse:
    proposal = proposal_services.access_proposal(request.user.pk, proposal_id)
    view = proposal_views(request.user.pk, [proposal])[0]
    following = request.POST.get("next", "")
    return render(request, "web/_proposal_card.html",
                  {"p": view, "card_error": error, "next": following,
                   "hlevel": 2 if following.startswith("/chats/") else 3, "in_chat": following.startswith("/chats/"),
                   "oob": True, "answered": True, "nav_pending": inbox_pending_count(request.user.pk),
                   "nav_section": "chats" if following.startswith("/chats/") else "inbox"}, status=status)


def _answer(request: AuthenticatedHttpRequest, proposal_id: int, answer, done: tuple[str, str]) -> HttpResponse:
    """Confirm or drop one proposal from its card or the inbox; the service decides, the page only tells.
    ``done``: what the page then says of a note to save, and of a note to forget."""
    proposal = proposal_services.access_proposal(request.user.pk, proposal_id)
    try:
        answer(owner_id=request.user.pk, proposal_id=proposal.pk, actor="you")
    except NotFound:
        raise
    except ApplicationError as exc:
        if is_htmx(request):
            return _card(request, proposal.pk, error=exc.message)
        flash_error(request, exc)
        return back(request, "/inbox/")
    if is_htmx(request):
        return _card(request, proposal.pk)
    said = done[1] if proposal.is_delete else done[0]
    if proposal.provider and answer is proposal_services.proposal_confirm:
        # an add-on's suggestion goes to the add-on, which keeps it (or forgets): as its card and the audit say
        said = (f"Handed to the memory add-on “{addon_label(proposal.provider)}”"
                + (" to forget" if proposal.is_delete else ""))
    messages.success(request, f"{said}: {proposal.topic}.")
    return back(request, "/inbox/")


@login_required
@not_found_as_404
@require_POST
def proposal_confirm(request: AuthenticatedHttpRequest, proposal_id: int) -> HttpResponse:
    return _answer(request, proposal_id, proposal_services.proposal_confirm, ("Saved to memory", "Forgotten"))


@login_required
@not_found_as_404
@require_POST
def proposal_reject(request: AuthenticatedHttpRequest, proposal_id: int) -> HttpResponse:
    # "Dropped", as the card, the API, the bots and the terminal call a no (``proposals.rejected_text``).
    return _answer(request, proposal_id, proposal_services.proposal_reject, ("Dropped", "Kept"))


@login_required
@not_found_as_404
@require_POST
def change_undo(request: AuthenticatedHttpRequest, change_id: int) -> HttpResponse:
    """Undo a change set: an automatic note within its 30 minutes, or a note you confirmed. From a page, the
    card or the "Saved to memory" line it was on comes back whole (``swap``), so it reads as after a reload."""
    from .chats import saved_line  # chats imports this module
    change = notes_selectors.access_change(owner_id=request.user.pk, change_id=int_or_404(change_id))
    error = None
    try:
        notes_services.change_undo(owner_id=request.user.pk, change_id=change.pk, actor="you",
                                   not_after=change.undo_until if change.automatic else None)
    except NotFound:
        raise
    except ApplicationError as exc:
        error = exc.message
    if is_htmx(request):  # the card or the line the Undo was on, whole, as a reload shows it
        swap = request.POST.get("swap", "")
        if change.proposal_id is not None and swap == f"proposal-{change.proposal_id}":
            return _card(request, change.proposal_id, error=error)
        if swap == "saved-line" and (found := saved_line(owner_id=request.user.pk, change=change)) is not None:
            chat, line = found
            return render(request, "web/_saved_line.html", {"s": line, "chat": chat, "line_error": error})
        return render(request, "web/_undo_result.html", {"change": change, "error": error},
                      status=200)
    if error:
        flash(request, messages.ERROR, error)
    else:
        flash(request, messages.SUCCESS, f"Undid \u201c{change.summary}\u201d: memory is as it was before it.")
    return back(request, "/inbox/")
