"""Chats: the list, a new chat, the chat page with what memory did on every turn, and deleting a chat.

The chat page shows the conversation; a Tools menu whose Memory row is the chat's switch (off = a private
chat, with the "Private chat" chip); a "used N memories" chip that opens what the turn read; a card for each
proposal (Save / Don't save, with its expiry); "Saved to memory" with an Undo for 30 minutes for a note saved
at once; and, when memory is off, one line naming the level that is off and how to turn it on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.text import Truncator
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from localai_memory.agents import selectors as agent_selectors
from localai_memory.chats import selectors as chat_selectors
from localai_memory.chats import services as chat_services
from localai_memory.chats.models import Chat, Message, Role
from localai_memory.core.errors import ApplicationError, NotFound, UpstreamError
from localai_memory.memory import proposals as proposal_services
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import INDEX_NAME

from .common import AuthenticatedHttpRequest, int_or_404, is_htmx, not_found_as_404, page
from .inbox import ProposalView, proposal_views
from .memory import MEMORY_TAB

#: Where each level that can turn memory off is fixed, for the "memory is off" line.
BLOCKED = {
    "run": ("Memory is off for this run", None, None),
    "chat": ("Memory is off because this chat is private", None, None),
    "agent": ("Memory is off because of this chat's agent", "agent", "Open the agent form"),
    "user": ("Memory is off in your settings", "/settings/memory/", "Open Your settings → Memory"),
    "server": ("Memory is off on this server", None, None),
    "provider": ("Memory is off because your memory add-on is not running", "/settings/memory/",
                 "Open Your settings → Memory"),
}
#: The event (HX-Trigger) telling the composer the server has its message, so drafts.js lets it go; without it
#: (a refusal, a message not sent) the text stays in the box and in the tab's draft.
TAKEN = "draft-taken"
#: The session key of a message sent to a chat deleted meanwhile: the chat list offers it for a new chat, whose
#: composer gets it (``UNSENT`` + ":<chat id>") once.
UNSENT = "chat_unsent"
#: The session key (+ ":<chat id>") of why the browser's own post of a message failed, shown once by the chat
#: page it is sent on to: a reload then shows the chat again rather than posting the message a second time.
SEND_ERROR = "chat_send_error"

#: The codes whose fix (``policy.MESSAGES``) opens with a sentence that says again what the line's title says
#: ("Memory is off in your settings. Turn it on …"): the line gives only the rest, what to do.
FIX_REPEATS_TITLE = frozenset({"user_off", "private_chat", "memory_provider_unavailable"})
#: A code whose level is fixed elsewhere than its level's line says.
BLOCKED_CODES = {
    "memory_provider_one_store": ("Memory is off because your memory add-on cannot keep this agent's notes apart",
                                  "agent", "Open the agent form"),
}
SCOPE_WORDS = {"user": "Your notes", "agent": "The agent's notes", "channel": "This conversation's notes"}
#: What the chip says when recall could not rank by meaning (``report["recall"]["degraded"]``).
RECALL_DEGRADED = {
    "no_embedder": "No embedding model is set up, so recall matched words only.",
    "no_vectors": "Your notes are still being prepared for recall, so it matched words only.",
    "low_coverage": "Some of your notes are still being prepared for recall, so it matched words only.",
    "dim_mismatch": "The embedding model changed and your notes are being prepared again; recall matched "
                    "words only.",
    "query_embed_failed": "The embedding model did not answer, so recall matched words only.",
    "recall_failed": "Recall failed on this turn; only the indexes were used.",
}


@dataclass
class SavedView:
    topic: str
    summary: str
    scope: str
    change_id: int | None
    undo_until: datetime | None
    undone: bool
    already_saved: bool
    #: The note it replaced (``{summary, details}``, each None when it had none); None: it made a new note.
    before: dict[str, str | None] | None = None

    @property
    def replaced_line(self) -> bool:
        """Whether it replaced another index line (struck through beside it, as a proposal's Before); a save
        of new details under the same line shows the details before only."""
        return bool(self.before and self.before.get("summary") and self.before["summary"] != self.summary)

    @property
    def undo_open(self) -> bool:
        return (self.change_id is not None and not self.undone and self.undo_until is not None
                and timezone.now() < self.undo_until)


@dataclass
class MessageView:
    message: Message
    used: list[dict[str, str]] = field(default_factory=list)
    recall_degraded: str = ""
    saved: list[SavedView] = field(default_factory=list)
    proposals: list[ProposalView] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    reverted: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_user(self) -> bool:
        return self.message.role == Role.USER

    @property
    def has_report(self) -> bool:
        return bool(self.saved or self.proposals or self.refused or self.reverted)


def _used(report: dict[str, Any], line_only: dict[str, str]) -> list[dict[str, str]]:
    """What a turn read: the indexes put in the prompt, each topic the model opened, and each topic whose
    details recall put in front of the model. Each names the file it came from: a note with no topic file is a
    line of its index, and says so (``line_only``: ``_one_line_notes``)."""
    items: list[dict[str, str]] = []
    for shown in report.get("read") or []:
        items.append({"label": f"{SCOPE_WORDS.get(shown.get('scope', ''), 'Notes')} (the index)",
                      "path": shown.get("path", "")})
    seen: set[tuple[str, str]] = set()
    for topic in report.get("topics_read") or []:
        if (topic.get("scope", ""), topic.get("topic", "")) in seen:
            continue
        seen.add((topic.get("scope", ""), topic.get("topic", "")))
        items.append(_used_topic(topic, "from", line_only))
    recall = report.get("recall") or {}
    for note in recall.get("notes") or []:
        # a recalled line without details is in the index already
        if (note.get("scope", ""), note.get("topic", "")) in seen or not note.get("shown"):
            continue
        seen.add((note.get("scope", ""), note.get("topic", "")))
        items.append(_used_topic(note, "recalled from", line_only))
    return items


def _used_topic(item: dict[str, Any], how: str, line_only: dict[str, str]) -> dict[str, str]:
    """“home” from your notes, at its topic file; or, for a note that is one index line, that line, at the
    index (its topic file does not exist)."""
    path = str(item.get("path", ""))
    path = line_only.get(path, path)
    where = SCOPE_WORDS.get(item.get("scope", ""), "notes").lower()
    if path.endswith(f"/{INDEX_NAME}"):
        return {"label": f"“{item.get('topic')}” {how} {where}: its line in the index", "path": path}
    return {"label": f"“{item.get('topic')}” {how} {where}", "path": path}


def _one_line_notes(owner_id: int, reports: Iterable[dict[str, Any]]) -> dict[str, str]:
    """The topic files the turns' reports name that do not exist, for notes that are one index line now, each
    with its index's path. A report stored before the model's read named the index for such a note names
    ``Memory/<topic>.md``, a file the chip's link cannot open; it is shown as a report stored now names it."""
    paths = [str(item.get("path", "")) for report in reports
             for item in [*(report.get("topics_read") or []), *((report.get("recall") or {}).get("notes") or [])]
             if isinstance(item, dict) and item.get("path")]
    return notes_selectors.one_line_notes(owner_id=owner_id, paths=paths)


def message_views(owner_id: int, rows: list[Message]) -> list[MessageView]:
    """Each message with what memory did on its turn, read in bulk (changes and proposals by id)."""
    reports = {m.pk: (m.memory or {}) for m in rows if m.role == Role.ASSISTANT}
    line_only = _one_line_notes(owner_id, reports.values())
    change_ids = {s["change_id"] for r in reports.values() for s in r.get("saved", []) if s.get("change_id")}
    proposal_ids = {p["proposal_id"] for r in reports.values() for p in r.get("proposed", []) if p.get("proposal_id")}
    undone = set()
    if change_ids:
        undone = {c.pk for c in notes_selectors.change_list(owner_id=owner_id).filter(pk__in=change_ids)
                  if c.reverted_by.all()}
    by_id: dict[int, ProposalView] = {}
    if proposal_ids:
        found = list(proposal_services.proposal_list(owner_id=owner_id, status=None)
                     .filter(pk__in=proposal_ids).select_related("change_set"))
        by_id = {view.pk: view for view in proposal_views(owner_id, found)}
    views = []
    for row in rows:
        view = MessageView(row)
        report = reports.get(row.pk)
        if report:
            view.used = _used(report, line_only)
            degraded = (report.get("recall") or {}).get("degraded")
            view.recall_degraded = RECALL_DEGRADED.get(degraded, "") if degraded else ""
            for saved in report.get("saved", []):
                until = parse_datetime(saved["undo_until"]) if saved.get("undo_until") else None
                view.saved.append(SavedView(topic=saved.get("topic", ""), summary=saved.get("summary", ""),
                                            scope=saved.get("scope", ""), change_id=saved.get("change_id"),
                                            undo_until=until, undone=saved.get("change_id") in undone,
                                            already_saved=bool(saved.get("already_saved")),
                                            before=saved.get("before") or None))
            view.proposals = [by_id[p["proposal_id"]] for p in report.get("proposed", [])
                              if p.get("proposal_id") in by_id]
            view.refused = list(report.get("refused", []))
            view.reverted = list(report.get("reverted", []))
        views.append(view)
    return views


def reply_announcement(views: list[MessageView]) -> str:
    """What the page's live region says when an answer arrives (the conversation it replaces is no live region):
    the reply, shortened, and what memory did on its turn."""
    if not views or views[-1].is_user:
        return ""
    last = views[-1]
    said = [f"The assistant answered: {Truncator(last.message.content).chars(300)}"]
    said += [f"Saved to memory: {s.topic}"
             + (f", in place of “{s.before['summary']}”." if s.replaced_line and s.before else ".")
             for s in last.saved if not s.already_saved]
    for p in last.proposals:
        topic = p.proposal.topic
        said.append(f"It proposes to forget the note “{topic}”: Forget it or Keep it." if p.proposal.is_delete
                    else f"It proposes a note to save, “{topic}”: Save or Don't save.")
    for refused in last.refused:
        topic = f" ({refused['topic']})" if refused.get("topic") else ""
        said.append(f"Not saved{topic}: {refused.get('message', '')}")
    return " ".join(said)


def saved_line(*, owner_id: int, change: ChangeSet) -> tuple[Chat, SavedView] | None:
    """The "Saved to memory" line of the note a turn saved at once with ``change``, as the chat shows it now
    (after its Undo: "Undone: …"), with its chat; None when no turn of the owner's chats reported it."""
    if change.chat_id is None:
        return None
    try:
        chat = chat_selectors.access_chat(owner_id, change.chat_id)
    except NotFound:
        return None
    rows = list(chat_selectors.chat_messages(chat=chat).filter(
        role=Role.ASSISTANT, memory__saved__contains=[{"change_id": change.pk}]))
    for view in message_views(owner_id, rows):
        for line in view.saved:
            if line.change_id == change.pk:
                return chat, line
    return None


@login_required
@require_GET
def chat_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    chats = list(chat_selectors.chat_list(owner_id=request.user.pk)[:200])
    agents = list(agent_selectors.agent_list(owner_id=request.user.pk))
    return page(request, "web/chats.html", {"chats": chats, "agents": agents,
                                            "unsent": request.session.get(UNSENT, "")}, section="chats")


@login_required
@not_found_as_404
@require_POST
def chat_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """New chat: the newest chat with nothing in it yet, or a new one (``chat_start``)."""
    raw = request.POST.get("agent", "")
    agent_id = int_or_404(raw) if raw else None
    try:
        chat = chat_services.chat_start(owner_id=request.user.pk, agent_id=agent_id)
    except NotFound:
        raise
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("/chats/")
    if "content" in request.POST:  # the message a deleted chat did not take, put in this one's composer
        request.session.pop(UNSENT, None)
        request.session[f"{UNSENT}:{chat.pk}"] = request.POST["content"].replace("\r\n", "\n")
    return redirect(f"/chats/{chat.pk}/")


def _off_fix(code: str | None, fix: str) -> str:
    """What the "memory is off" line says after its title: the policy's fix, without a first sentence that
    only repeats the title."""
    if code in FIX_REPEATS_TITLE:
        rest = fix.partition(". ")[2]
        return rest or fix
    return fix


def _chat_context(request: AuthenticatedHttpRequest, chat: Chat, **extra: Any) -> dict[str, Any]:
    rows = list(chat_selectors.chat_messages(chat=chat))
    status = chat_selectors.memory_status(chat=chat)
    memory = status["memory"]
    blocked = BLOCKED_CODES.get(memory.get("code") or "") or BLOCKED.get(memory.get("blocked_by") or "",
                                                                         ("Memory is off", None, None))
    fix_url = blocked[1]
    if fix_url == "agent" and chat.agent_id:
        fix_url = f"/agents/{chat.agent_id}/"
    # A turn stores the message with its reply, so a last message without one is a turn that failed (the model,
    # the page closed meanwhile): "Ask again" sends it without a copy, after a reload too (``turn_retry``).
    last = rows[-1] if rows else None
    context = {
        "chat": chat,
        "views": message_views(request.user.pk, rows),
        "status": status,
        "off_title": blocked[0],
        "off_fix": _off_fix(memory.get("code"), memory.get("fix") or ""),
        "fix_url": fix_url if fix_url != "agent" else None,
        "fix_label": blocked[2],
        "error": None,
        "draft": "",
        "kept_message": last.pk if last is not None and last.role == Role.USER and chat.origin == "web" else None,
    }
    context.update(extra)
    return context


@login_required
@not_found_as_404
@require_GET
def chat_page(request: AuthenticatedHttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_selectors.access_chat(request.user.pk, chat_id)
    draft = request.session.pop(f"{UNSENT}:{chat.pk}", "")
    error = request.session.pop(f"{SEND_ERROR}:{chat.pk}", None)
    return page(request, "web/chat.html", _chat_context(request, chat, draft=draft, error=error), section="chats")


def _chat_gone(request: AuthenticatedHttpRequest, title: str | None, content: str) -> HttpResponse:
    """Back to the chat list, saying so and offering the message (``content``) for a new chat: the chat was
    deleted (in another tab, with its account) while the model answered (``title``), or before this page sent
    (None)."""
    offered = " It is below, to put in a new chat." if content.strip() else ""
    if offered:
        request.session[UNSENT] = content
    messages.info(request, f"The chat “{title}” was deleted while the model was answering; neither your message "
                           f"nor the reply was kept.{offered}" if title is not None
                  else f"That chat was deleted (in another tab?); your message was not sent.{offered}")
    if is_htmx(request):  # the session has the message now: the old chat's composer lets it go
        return HttpResponse(status=204, headers={"HX-Redirect": "/chats/", "HX-Trigger": TAKEN})
    return redirect("/chats/")


@login_required
@not_found_as_404
@require_POST
def chat_send(request: AuthenticatedHttpRequest, chat_id: int) -> HttpResponse:
    try:
        chat = chat_selectors.access_chat(request.user.pk, chat_id)
    except NotFound:
        if is_htmx(request):  # a page still open on a chat deleted since: not a 404 page inside this one
            return _chat_gone(request, None, request.POST.get("content", "").replace("\r\n", "\n"))
        raise
    if chat.origin != "web":
        messages.error(request, "This conversation comes from a messaging app or a run; answer it there.")
        return redirect(f"/chats/{chat.pk}/")
    content = request.POST.get("content", "").replace("\r\n", "\n")
    if content.strip().lower() == "/memory":  # the chat's shortcut to the memory manager
        if is_htmx(request):
            return HttpResponse(status=204, headers={"HX-Redirect": MEMORY_TAB, "HX-Trigger": TAKEN})
        return redirect(MEMORY_TAB)
    error = None
    kept = None  # the message the failed model left unanswered (the page offers "Ask again" for it)
    retry = request.POST.get("retry")
    try:
        if retry:
            chat_services.turn_retry(chat=chat, message_id=retry)
        else:
            chat_services.turn_run(chat=chat, content=content)
    except chat_services.ChatDeleted:  # deleted in another tab while the model answered: it stays deleted
        return _chat_gone(request, str(chat), content)
    except UpstreamError as exc:
        error = f"The model did not answer: {exc.message}"
        kept = (exc.details.get("user_message_id") if isinstance(exc.details, dict) else None) or retry or None
    except ApplicationError as exc:
        error = exc.message
    try:
        chat.refresh_from_db()
    except Chat.DoesNotExist:  # gone with its account (410 account_deleted) while the model answered
        return _chat_gone(request, str(chat), content)
    # A message the chat kept is not put back in the box (sent again, it would be there twice).
    draft = content if error and not kept and not retry else ""
    context = _chat_context(request, chat, error=error, draft=draft)
    if is_htmx(request):
        response = page(request, "web/_conversation.html",
                        {**context, "oob": True, "announce": reply_announcement(context["views"])}, section="chats")
        if not draft:  # the chat has the message (answered, or kept to ask again): the box lets it go
            response["HX-Trigger"] = TAKEN
        return response
    if error:
        # Post, then redirect: the chat page says why once and offers Ask again for a kept message (or puts an
        # unsent one back in the box), and a reload shows the chat instead of posting the message again.
        request.session[f"{SEND_ERROR}:{chat.pk}"] = error
        if draft:
            request.session[f"{UNSENT}:{chat.pk}"] = draft
    return redirect(f"/chats/{chat.pk}/#composer")


@login_required
@not_found_as_404
@require_POST
def chat_memory_switch(request: AuthenticatedHttpRequest, chat_id: int) -> HttpResponse:
    """The Memory row of the Tools menu: off makes this chat private."""
    chat = chat_selectors.access_chat(request.user.pk, chat_id)
    wanted = request.POST.get("memory")
    if wanted in ("on", "off"):
        chat = chat_services.chat_set_private(owner_id=request.user.pk, chat_id=chat.pk, private=wanted == "off")
        messages.success(request, "This chat is private now." if chat.private else "Memory is on for this chat again.")
    return redirect(f"/chats/{chat.pk}/")


@login_required
@not_found_as_404
@require_http_methods(["GET", "POST"])
def chat_delete(request: AuthenticatedHttpRequest, chat_id: int) -> HttpResponse:
    """Delete chat: a page that says what goes and what stays; its button deletes, back to the chat list."""
    chat = chat_selectors.access_chat(request.user.pk, chat_id)
    if request.method == "POST":
        deleted = chat_services.chat_delete(owner_id=request.user.pk, chat_id=chat.pk)
        messages.success(request, f"Deleted the chat “{deleted.title}”.")
        return redirect("/chats/")
    waiting = proposal_services.proposal_list(owner_id=request.user.pk).filter(chat_id=chat.pk).exclude(
        reason="unused").count()
    saved = notes_selectors.change_list(owner_id=request.user.pk).filter(chat_id=chat.pk).exists()
    return page(request, "web/chat_delete.html", {"chat": chat, "waiting": waiting, "saved": saved},
                section="chats")
