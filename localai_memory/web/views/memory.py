"""Your settings → Memory: the switch, the provider, how notes are saved, the notes themselves, export, forget."""

from __future__ import annotations

import io
import logging
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.messages.storage.base import Message
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from bridges import selectors as bridge_selectors
from localai_memory.agents.selectors import agent_scope_gone, deleted_agent_names
from localai_memory.core.errors import ApplicationError, Conflict, InvalidInput, NotFound
from localai_memory.core.middleware import takes_a_file
from localai_memory.core.numbers import whole_number
from localai_memory.growth import importing
from localai_memory.growth.import_answer import (
    DELETED,
    EXPIRES,
    folder_lines,
    import_answer,
    import_upload,
    largest_file,
    read_upload,
    too_big,
    too_long,
)
from localai_memory.growth.selectors import line_writers, owner_scopes
from localai_memory.memory import services as memory_services
from localai_memory.memory.api import listing_profile, scope_listing
from localai_memory.memory.models import MessagingSave, SaveMode
from localai_memory.memory.proposals import proposal_list
from localai_memory.memory.providers import ProviderInfo, addon_label, canonical, memory_providers
from localai_memory.memory.selectors import MemoryState, addon_forget_requests, memory_state, owned_scope
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import Scope, parse_path
from localai_memory.recall.service import notes_activity

from ..middleware import TooLargeAnswer, says_too_large
from .common import AuthenticatedHttpRequest, back, flash, flash_error, flash_places, not_found_as_404, page
from .files import deleted_agent_label, deleted_while_edited, editor_context, save_file

MEMORY_TAB = "/settings/memory/"
log = logging.getLogger(__name__)

SAVE_CHOICES = [
    (SaveMode.AUTO, "Save it and tell me",
     ("In your own chats the note is saved at once. The chat shows “Saved to memory” with an Undo, and no "
     "confirmation card.")),
    (SaveMode.ASK, "Ask me first",
     "The assistant proposes the note and you confirm it, in the chat or in the inbox. This is the default."),
    (SaveMode.ALWAYS, "Always confirm",
     ("Like Ask me first, and nothing can loosen it: no agent or messaging setting, and the model's own undo "
     "and forget wait for you too.")),
    (SaveMode.NEVER, "Never",
     "The assistant cannot propose a note. It says that saving is off if you ask it to remember something."),
]

MESSAGING_CHOICES = [
    (MessagingSave.ASK, "Ask me first",
     ("The bot asks in the chat. A sender you allowed can answer there; others wait for you in the inbox. "
     "This is the default.")),
    (MessagingSave.PAIRED_PRIVATE, "Save it for a paired sender in a private chat",
     ("Saved at once only when the sender is paired and the chat is one-to-one, to that conversation's notes, "
     "with an Undo. Anything else still asks.")),
    (MessagingSave.NEVER, "Never", "No note is saved from messaging apps."),
]


@dataclass(frozen=True)
class Tab:
    key: str
    label: str
    scopes: list[dict]
    empty: str


def status_line(state: MemoryState, providers: dict[str, str]) -> tuple[str, str]:
    """(level, sentence) saying whether memory serves now and, when not, why and how to turn it on."""
    if not state.enabled:
        return ("warning", ("Memory is off. Nothing from your notes is put in any chat, and the assistant cannot "
                           "read or save a note. Your notes stay where they are. Turn the switch on to use them."))
    if state.provider_state == "addon_unavailable":
        label = providers.get(state.provider_choice, state.provider_choice)
        return ("error", (f"Memory is off because the add-on “{label}” is not running. Pick it again once it "
                         "runs, or pick Built-in under Memory provider."))
    if not state.server_files_on:
        return ("error", ("Memory is off because this server has files turned off, and notes are files. Ask the "
                         "administrator to turn files on."))
    if state.provider_state == "addon":
        label = providers.get(state.provider_choice, state.provider_choice)
        return ("success", f"Memory is on, served by the add-on “{label}”.")
    return ("success", "Memory is on.")


#: A kind of note as the Memory tab names it (``memory.categories``), singular and plural.
KIND_WORDS = {"credential": ("secret-looking", "secret-looking"), "decision": ("decision", "decisions"),
              "preference": ("preference", "preferences"), "skill": ("skill", "skills"),
              "project": ("project", "projects"), "identity": ("about you", "about you"), "fact": ("fact", "facts")}


def _profile(scopes: list[dict]) -> dict:
    """The notes of every scope at a glance: how many of each kind (with their topics) and the names they
    mention most (``memory.categories.profile``)."""
    made = listing_profile(scopes)
    kinds = [{"kind": kind, "words": KIND_WORDS[kind][0 if len(notes) == 1 else 1], "count": len(notes),
              "topics": [n["topic"] for n in notes]} for kind, notes in made.categories.items() if notes]
    return {"kinds": kinds, "entities": made.entities[:12]}


def _tabs(owner_id: int) -> list[Tab]:
    scopes = scope_listing(owner_id=owner_id, with_details=True)
    tabs = [Tab("yours", "Yours", [s for s in scopes if s["kind"] == "user"],
                "No notes yet — ask the assistant to remember something in a chat, or add one here.")]
    for scope in scopes:
        if scope["kind"] == "agent" and not scope["deleted_agent"]:
            tabs.append(Tab(f"agent-{scope['key']}", scope["label"], [scope],
                            "No notes yet — this agent's own notes show here once it saves one."))
    deleted = [s for s in scopes if s["kind"] == "agent" and s["deleted_agent"]]
    names = deleted_agent_names(owner_id) if deleted else {}
    for scope in deleted:
        scope["label"] = deleted_agent_label(scope["key"], names)
    tabs.append(Tab("deleted", "Deleted agents", deleted,
                    "No notes of deleted agents — when you delete an agent and keep its notes, they show here."))
    conversations = [s for s in scopes if s["kind"] == "channel"]
    if conversations:
        titles = conversation_titles(owner_id)
        for scope in conversations:
            scope["label"] = titles.get(scope["key"], f"A conversation no bot carries now ({scope['key']})")
        tabs.append(Tab("conversations", "Conversations", conversations,
                        "No notes of messaging conversations yet."))
    return tabs


#: Who last changed a note, as the Memory tab says it (``growth.selectors.line_writers`` authors).
WRITER_WORDS = {"user": "you", "model": "the assistant, on its own", "import": "an import"}


def _add_writers(owner_id: int, tab: Tab) -> None:
    """Each shown note's ``written``: who changed it last and when, so a person sees at a glance which notes
    the assistant saved by itself (a note whose history is too old to tell gets none); ``used``: when a turn
    last brought it into a chat (recall); ``waiting``: a suggestion to change or forget it that waits in the
    inbox ("change" or "forget"); and ``kind``: its category in the tab's words."""
    for scope in tab.scopes:
        if not scope["index"]:
            continue
        item = Scope(scope["kind"], scope["key"])
        written = line_writers(owner_id=owner_id, scope=item, topics=[entry["topic"] for entry in scope["index"]])
        activity = notes_activity(owner_id=owner_id, scope=item)
        # only suggestions for these notes: one waiting for a memory add-on is about the add-on's notes
        pending = proposal_list(owner_id=owner_id).filter(scope_kind=scope["kind"], scope_key=scope["key"],
                                                          provider="")
        waiting = {topic: "forget" if delete else "change"
                   for topic, delete in pending.order_by("created_at").values_list("topic", "is_delete")}
        for entry in scope["index"]:
            entry["kind"] = KIND_WORDS[entry["category"]][0]
            if entry["topic"] in waiting:
                entry["waiting"] = waiting[entry["topic"]]
            if (last := written.get(entry["topic"])) is not None:
                entry["written"] = {"by": WRITER_WORDS[last.author], "at": last.at, "ago": _ago(last.at)}
            found = activity.get((item.kind, item.key, entry["topic"]))
            if found is not None and found.used_at is not None:
                entry["used"] = {"at": found.used_at, "ago": _ago(found.used_at)}


def _ago(at: datetime) -> str:
    return "just now" if timezone.now() - at < timedelta(minutes=1) else f"{timesince(at)} ago"


def conversation_titles(owner_id: int) -> dict[str, str]:
    """The conversations of the owner's bots by their notes key: "Family group (Telegram bot “Home”)"."""
    titles: dict[str, str] = {}
    for binding in bridge_selectors.binding_list(owner_id=owner_id):
        for conversation in bridge_selectors.conversation_list(binding=binding):
            titles[conversation.channel_key] = f"{conversation} ({binding.get_platform_display()} bot “{binding.name}”)"
    return titles


#: The session key of a note the Memory tab's Add form could not save (shown again in its form).
NOTE_DRAFT = "memory_note_draft"
#: The session key of an importance a note's Importance form could not save (shown again in its form, open).
IMPORTANCE_DRAFT = "memory_importance_draft"
#: At most this many characters of a refused importance are kept to be shown again (a number is a few).
IMPORTANCE_KEPT = 40


@login_required
@require_GET
def memory_tab(request: AuthenticatedHttpRequest) -> HttpResponse:
    state = memory_state(user_id=request.user.pk)
    providers = memory_providers()
    labels = {p.name: p.label for p in providers}
    choice = canonical(state.provider_choice)  # the old "memory" add-on's name is Built-in
    if state.provider_state == "addon_unavailable" and all(p.name != choice for p in providers):
        # The add-on picked was removed: the menu still shows the choice ("memory is off and the tab says
        # which add-on it was"), never Built-in, which does not serve.
        providers = [*providers, ProviderInfo(name=choice, label=f"{choice} (not installed)", kind="missing",
                                              running=False)]
    tabs = _tabs(request.user.pk)
    glance = _profile([scope for t in tabs for scope in t.scopes])
    wanted = request.GET.get("tab", "yours")
    current = next((t for t in tabs if t.key == wanted), tabs[0])
    _add_writers(request.user.pk, current)
    draft = request.session.pop(NOTE_DRAFT, None)  # a note the Add form could not save: typed again for you
    weighed = request.session.pop(IMPORTANCE_DRAFT, None)  # an importance refused: typed again, its form open
    for scope in current.scopes:
        name = "user" if scope["kind"] == "user" else f"{scope['kind']}:{scope['key']}"
        scope["draft"] = draft if isinstance(draft, dict) and draft.get("scope") == name else None
        if isinstance(weighed, dict) and weighed.get("scope") == name:
            for entry in scope["index"]:
                if entry["topic"] == weighed.get("topic"):
                    entry["importance_typed"] = str(weighed.get("importance", ""))
    level, sentence = status_line(state, labels)
    placed = _place_messages(request, current)
    imported = _import_shown(request)
    import_draft = request.session.pop(IMPORT_DRAFT, "")
    return page(request, "web/memory_tab.html", {
        "deleted": _deleted_note(request),
        "state": state,
        "status_level": level,
        "status_sentence": sentence,
        "providers": providers,
        "provider_selected": choice if state.enabled else "off",
        "save_choices": SAVE_CHOICES,
        "messaging_choices": MESSAGING_CHOICES,
        "tabs": tabs,
        "tab": current,
        "last_pass": _last_pass(request.user.pk),
        "handed": _handed(request.user.pk),
        "addon_forgets": _addon_forgets(request.user.pk),
        "profile": glance,
        "flash": placed,
        "imported": imported,
        "import_draft": import_draft if isinstance(import_draft, str) else "",
        # the Import part says its form was refused: what was typed into it comes back (``drafts.js``), also
        # facts refused unread, over the server's body limit (``FormTooLargeMiddleware``), which the tab cannot
        # type again itself
        "import_refused": any(message.level == messages.ERROR for message in placed["import"]),
    }, section="memory")


#: The parts of the tab a form lands on (the fragment of its redirect), where its message is shown.
SECTIONS = ("addons", "saving", "messaging", "growing", "notes", "import")


def _place_messages(request: AuthenticatedHttpRequest, tab: Tab) -> dict[str, list[Message]]:
    """The messages for this page where the person is: each in the part its form's redirect lands on (a
    section, the Add form of a scope ``add-<n>``, a note's row ``note-<n>-<topic>``), so it is in view and not
    a screen or more above at the top of the page; a message for no part of this tab shows at the top."""
    places = flash_places(request)
    placed = {name: places.pop(name, []) for name in SECTIONS}
    for number, scope in enumerate(tab.scopes, start=1):
        scope["flash"] = places.pop(f"add-{number}", [])
        for entry in scope["index"]:
            entry["flash"] = places.pop(f"note-{number}-{entry['topic']}", [])
    placed["top"] = [message for here in places.values() for message in here]
    return placed


#: How many of the latest notes handed to memory add-ons the tab lists.
HANDED_SHOWN = 10


def _handed(owner_id: int) -> list[ChangeSet]:
    """The latest notes confirmed for a memory add-on, from the audit of changes (``ChangeSet.Source.ADDON``):
    the add-on keeps them, so this is where the owner sees what went to it, who confirmed it and when."""
    return list(notes_selectors.change_list(owner_id=owner_id).filter(source=ChangeSet.Source.ADDON)
                [:HANDED_SHOWN])


def _addon_forgets(owner_id: int) -> list[dict]:
    """The memory add-ons that may still hold a deleted agent's notes (not running, or failed, when asked to
    drop them), each with its Ask again."""
    return [{"id": r.pk, "label": addon_label(r.addon), "whose": r.whose, "answer": r.get_answer_display(),
             "asked_at": r.asked_at} for r in addon_forget_requests(owner_id=owner_id)]


def _last_pass(owner_id: int) -> dict | None:
    from localai_memory.growth.selectors import last_pass, pass_sentence

    run = last_pass(owner_id=owner_id)
    return None if run is None else {"at": run.started_at, "sentence": pass_sentence(run),
                                     "trigger": run.get_trigger_display()}


@login_required
@require_POST
def memory_switch(request: AuthenticatedHttpRequest) -> HttpResponse:
    value = request.POST.get("enabled")
    if value not in ("on", "off"):
        messages.error(request, "Choose On or Off.")
        return redirect(MEMORY_TAB)
    state = memory_services.settings_update(user_id=request.user.pk, enabled=value == "on")
    messages.success(request, "Memory is on." if state.enabled else
                     "Memory is off. Your notes stay where they are; you can still read, edit, export and delete them.")
    return redirect(MEMORY_TAB)


@login_required
@require_POST
def memory_provider(request: AuthenticatedHttpRequest) -> HttpResponse:
    try:
        state = memory_services.provider_pick(user_id=request.user.pk, provider=request.POST.get("provider", ""))
    except ApplicationError as exc:
        flash_error(request, exc)
    else:
        messages.success(request, "Memory is off." if not state.enabled else "Memory provider saved.")
    return redirect(MEMORY_TAB)


@login_required
@not_found_as_404
@require_POST
def memory_addon_forget_ask(request: AuthenticatedHttpRequest, request_id: int) -> HttpResponse:
    """Ask a memory add-on again to drop a deleted agent's notes (``addon_forget_again``): it was not running,
    or failed, when the agent was deleted. What it answers is said where the list of such requests is (or
    where it was, once the list is empty)."""
    answer, _ = memory_services.addon_forget_again(owner_id=request.user.pk, request_id=request_id)
    flash(request, messages.SUCCESS if answer.status == "forgot" else messages.ERROR, answer.message,
          at="addons")
    return redirect(MEMORY_TAB + "#addons")


@login_required
@require_POST
def memory_saving(request: AuthenticatedHttpRequest) -> HttpResponse:
    save_mode = request.POST.get("save_mode")
    if save_mode is None:
        flash(request, messages.ERROR, "Choose how a note is saved.", at="saving")
        return redirect(MEMORY_TAB + "#saving")
    try:
        state = memory_services.settings_update(user_id=request.user.pk, save_mode=save_mode)
    except ApplicationError as exc:
        flash_error(request, exc, at="saving")
    else:
        flash(request, messages.SUCCESS, f"Saved: {SaveMode(state.save_mode).label}.", at="saving")
    return redirect(MEMORY_TAB + "#saving")


@login_required
@require_POST
def memory_messaging(request: AuthenticatedHttpRequest) -> HttpResponse:
    choice = request.POST.get("messaging_save")
    if choice is None:
        flash(request, messages.ERROR, "Choose how a note from a messaging app is saved.", at="messaging")
        return redirect(MEMORY_TAB + "#messaging")
    try:
        state = memory_services.settings_update(user_id=request.user.pk, messaging_save=choice)
    except ApplicationError as exc:
        flash_error(request, exc, at="messaging")
    else:
        flash(request, messages.SUCCESS, f"Saved for messaging apps: {MessagingSave(state.messaging_save).label}.",
              at="messaging")
    return redirect(MEMORY_TAB + "#messaging")


@login_required
@require_POST
def memory_growing(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The two switches of memory that grows: suggestions from chats, and proposals from MCP clients."""
    memory_services.settings_update(user_id=request.user.pk,
                                    consolidation_enabled="consolidation_enabled" in request.POST,
                                    mcp_propose_enabled="mcp_propose_enabled" in request.POST)
    flash(request, messages.SUCCESS, "Saved your choices for suggestions and other assistants.", at="growing")
    return redirect(MEMORY_TAB + "#growing")


#: What Synthesize now says instead of starting a pass that would find nothing to do (its skip reasons).
NOTHING_TO_SYNTHESIZE = {
    "memory_off": "Memory is off, so there is nothing to look through. Turn it on first.",
    "served_by_addon": "An add-on serves your memory and keeps its own notes, so there is nothing to suggest here.",
}


@login_required
@require_POST
def memory_synthesize(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Synthesize now: one consolidation pass in the background (a slow model must not hold the page). When a
    pass would find nothing to do (memory off, an add-on serving memory), the page says why instead."""
    from localai_memory.growth.consolidation import pass_skip_reason
    from localai_memory.growth.models import ConsolidationRun
    from localai_memory.growth.tasks import consolidate_user_task

    skip = pass_skip_reason(owner_id=request.user.pk, state=memory_state(user_id=request.user.pk),
                            trigger=ConsolidationRun.Trigger.MANUAL)
    if skip in NOTHING_TO_SYNTHESIZE:
        flash(request, messages.ERROR, NOTHING_TO_SYNTHESIZE[skip], at="growing")
        return redirect(MEMORY_TAB + "#growing")
    try:
        consolidate_user_task.delay(owner_id=request.user.pk, trigger=ConsolidationRun.Trigger.MANUAL)
    except Exception:  # the queue is down: say so rather than pretend
        log.warning("synthesize now could not be queued for user %s", request.user.pk, exc_info=True)
        flash(request, messages.ERROR, "Could not start it now; try again in a moment.", at="growing")
    else:
        flash(request, messages.SUCCESS, "Looking through your recent chats. Suggestions will wait in your inbox.",
              at="growing")
    return redirect(MEMORY_TAB + "#growing")


@login_required
@require_GET
def memory_export(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Export: the zip of the notes. With no note yet the tab says so instead of handing over an empty zip
    (which Import would refuse back: "The zip holds no notes"). The API still answers with the empty zip."""
    body = memory_services.memory_export_all(user_id=request.user.pk)
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        empty = not archive.namelist()
    if empty:
        flash(request, messages.INFO, "There is nothing to export yet: you have no notes. Once you have some, "
                                      "Export downloads them as a zip file.", at="notes")
        return redirect(MEMORY_TAB + "#notes")
    response = HttpResponse(body, content_type="application/zip")
    stamp = timezone.now().strftime("%Y-%m-%d")
    response["Content-Disposition"] = f'attachment; filename="memory-export-{stamp}.zip"'
    return response


#: The session keys of Import on the tab: what the last import did (shown once, in the Import part), and the
#: facts of one that was refused (typed again for you in its form).
IMPORT_ANSWER = "memory_import_answer"
IMPORT_DRAFT = "memory_import_facts"


def _import_too_large(request: HttpRequest, limit: int) -> str:
    """What the Import part says of a form posted past the server's body limit (``limit`` bytes), its body unread:
    the zip's form sends a file (multipart), the facts' form text. The file's limit is the smaller of the body's
    and the largest zip an import takes."""
    if request.content_type == "multipart/form-data":
        return too_big(largest_file())
    return too_long(limit)


@takes_a_file
@says_too_large(TooLargeAnswer(page=MEMORY_TAB + "#import", at="import", message=_import_too_large))
@login_required
@require_POST
def memory_import(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Import: an export zip (``file``) or a list of facts (``facts``, one a line), through the same service as
    the API and the terminal (refused while memory is off, as they refuse it). The answer is shown once in the
    Import part of the tab in their words, with a link to each suggestion it left in the inbox; a refusal is
    said there and writes nothing (an import is one transaction), and refused facts are typed again."""
    upload = request.FILES.get("file")
    facts = request.POST.get("facts", "").replace("\r\n", "\n")  # a browser's textarea sends CRLF
    try:
        if upload is not None:
            result = import_upload(owner_id=request.user.pk, data=read_upload(upload), name=upload.name or "")
        elif not facts.strip():
            raise InvalidInput("Choose an export zip, or type the facts to import, one a line.",
                               code="invalid_import")
        elif "\ufffd" in facts:  # bytes that are not UTF-8, as Django reads them: refused as the API does
            raise InvalidInput("The facts are not UTF-8 text.", code="invalid_import")
        else:
            result = importing.import_facts(owner_id=request.user.pk, text=facts, actor="you")
    except ApplicationError as exc:
        flash_error(request, exc, at="import")
        if upload is None and facts.strip():
            request.session[IMPORT_DRAFT] = facts
        return redirect(MEMORY_TAB + "#import")
    request.session[IMPORT_ANSWER] = import_answer(owner_id=request.user.pk, result=result).as_dict()
    return redirect(MEMORY_TAB + "#import")


def _import_shown(request: AuthenticatedHttpRequest) -> dict | None:
    """What the last import did, for the Import part of the tab (once): its words, and each suggestion it left
    in the inbox as it is now (one answered since says so) with its link and the time it expires."""
    answer = request.session.pop(IMPORT_ANSWER, None)
    if not isinstance(answer, dict):
        return None
    ids = [item["id"] for item in answer.get("inbox", [])]
    pending = set(proposal_list(owner_id=request.user.pk, status="pending").filter(pk__in=ids)
                  .values_list("pk", flat=True))
    inbox = [{**item, "expires_at": datetime.fromisoformat(item["expires_at"]), "pending": item["id"] in pending,
              "why": DELETED if item.get("reason") == "import_deleted" else ""} for item in answer.get("inbox", [])]
    lines = str(answer.get("message", "")).split("\n")
    return {"summary": lines[0], "inbox": inbox, "added": answer.get("added", []),
            "written": answer.get("written", []) if answer.get("mode") == "restored" else [],
            "unchanged": answer.get("unchanged", []), "folders": folder_lines(answer), "expires": EXPIRES}


@login_required
@require_http_methods(["GET", "POST"])
def memory_forget(request: AuthenticatedHttpRequest) -> HttpResponse:
    files = notes_selectors.file_list(owner_id=request.user.pk)
    if request.method == "POST":
        entry, addons = memory_services.memory_forget_all(user_id=request.user.pk)
        if entry is None:
            messages.info(request, "There were no notes to forget.")
        else:
            messages.success(request, "Your notes are in the Trash. You can restore them from Files → Trash.")
        for answer in addons:  # every memory add-on you used, serving or not
            (messages.success if answer.status == "forgot" else messages.error)(request, answer.message)
        return redirect(MEMORY_TAB)
    notes = sum(len(notes_selectors.index_entries(owner_id=request.user.pk, scope=scope))
                for scope in owner_scopes(owner_id=request.user.pk))
    return page(request, "web/memory_forget.html", {"file_count": files.count(), "note_count": notes},
                section="memory")


@login_required
@require_POST
def memory_note_add(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Add a note by hand: its index line and, optionally, its details. With no topic, the note gets one made
    from its first words (``chats.remember.note_add``); a topic in use is refused (nothing replaced), with a
    link that opens that note, and the form keeps what was typed."""
    from localai_memory.chats.remember import note_add

    topic = request.POST.get("topic", "").strip()
    summary = request.POST.get("summary", "")
    details = request.POST.get("details", "").replace("\r\n", "\n") or None  # a browser's textarea sends CRLF
    typed = {"scope": request.POST.get("scope", "user"), "topic": topic, "summary": summary,
             "details": details or ""}  # kept for the form when the note is refused
    try:
        scope = _note_scope(request, writes_topic=topic)
        if topic:  # Add never replaces a note quietly: one of that topic is opened and changed instead
            notes_services.note_upsert(owner_id=request.user.pk, scope=scope, topic=topic, summary=summary,
                                       details=details, source=ChangeSet.Source.FILES, actor="you",
                                       create_only=True)
            change = True
        else:
            added, topic = note_add(owner_id=request.user.pk, scope=scope, summary=summary, details=details,
                                    source=ChangeSet.Source.FILES)
            change = added is not None
    except Conflict as exc:
        if exc.code != "topic_exists":
            flash(request, messages.INFO, exc.message)
        else:
            flash(request, messages.ERROR, format_html(
                "A note “{}” exists already: <a href=\"{}\">open it</a> to change it, or pick another topic. "
                "Nothing was replaced.", topic, _note_url(request.user.pk, scope, topic)))
            request.session[NOTE_DRAFT] = typed
    except ApplicationError as exc:
        flash_error(request, exc)
        request.session[NOTE_DRAFT] = typed
    else:
        if change:
            flash(request, messages.SUCCESS, f"Saved the note “{topic}”.")
        else:
            flash(request, messages.INFO, f"That is already in memory, as the note “{topic}”.")
    return back(request, MEMORY_TAB)


def _note_url(owner_id: int, scope: Scope, topic: str) -> str:
    """Where the tab's row of the note opens it: its topic file, or the index for a note that is one line."""
    entry = next((e for e in notes_selectors.index_entries(owner_id=owner_id, scope=scope) if e.topic == topic),
                 None)
    path = scope.topic_path(topic) if entry is not None and entry.file else scope.index_path
    return f"/settings/memory/note/?{urlencode({'path': path})}"


@login_required
@require_POST
def memory_note_importance(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Give one note an importance for recall (0 to 1), or empty for its writer's (``note_importance_set``). A
    refused one (not a number from 0 to 1, the note changed meanwhile) is typed again in the note's form, open,
    by the message saying why: the person saves it again with one click, or changes it."""
    scope = _note_scope(request)
    topic = request.POST.get("topic", "").strip()
    raw = request.POST.get("importance", "").strip()
    typed = {"scope": request.POST.get("scope", "user"), "topic": topic, "importance": raw[:IMPORTANCE_KEPT]}
    try:
        try:
            value = None if raw == "" else float(raw)
        except ValueError:
            value = -1.0  # refused below, with the same sentence
        if value is not None and not 0 <= value <= 1:  # also "5", "nan", "inf"
            raise InvalidInput("Importance is a number from 0 to 1, or empty for the default.",
                               code="invalid_importance")
        value = notes_services.note_importance_set(owner_id=request.user.pk, scope=scope, topic=topic,
                                                   importance=value, note_version=_read_version(request))
    except Conflict as exc:
        flash(request, messages.ERROR, _stale_note(
            exc, nothing="its importance was not changed",
            again="What you typed is still in its form: save it again if you still want it."))
        request.session[IMPORTANCE_DRAFT] = typed
    except ApplicationError as exc:
        flash_error(request, exc)
        request.session[IMPORTANCE_DRAFT] = typed
    else:
        flash(request, messages.SUCCESS, f"The note “{topic}” now has importance {value:g}." if value is not None
              else f"The note “{topic}” has its writer's importance again.")
    return back(request, MEMORY_TAB)


def _read_version(request: AuthenticatedHttpRequest) -> object:
    """The ``note_version`` of the note as the tab showed it (every note form sends it); a form posted from a
    page made before the forms sent it is not checked."""
    return request.POST.get("note_version", notes_services.UNCHECKED)


#: At most this many characters of a note's details are quoted in the tab's message about it.
QUOTED_DETAILS = 300


def _stale_note(exc: Conflict, *, nothing: str, again: str) -> str:
    """The tab's words for a note that changed since the page was loaded (``check_note_version``'s 409, or
    any other conflict's own message): what was not done, and the note as it is now."""
    if exc.code != "stale_version" or not isinstance(exc.details, dict):
        return exc.message
    now = exc.details
    if now.get("summary") is None:
        return f"The note “{now['topic']}” was deleted since this page was loaded, so {nothing}."
    text = (f"The note “{now['topic']}” changed since this page was loaded (in another tab, or by the "
            f"assistant), so {nothing}. It now reads: “{now['summary']}”")
    details = (now.get("details") or "").strip()
    if details:
        quoted = details if len(details) <= QUOTED_DETAILS else details[:QUOTED_DETAILS].rstrip() + "…"
        text += f", with the details “{quoted}”"
    importance = now.get("importance")
    if isinstance(importance, (int, float)) and not isinstance(importance, bool):
        text += f", importance {importance:g}"  # a change of its importance alone is a change too
    return f"{text}. {again}"


_FRAGMENT = re.compile(r"[A-Za-z0-9_-]{1,200}")


def _landing_at(response: HttpResponse, at: str | None) -> HttpResponse:
    """The redirect ``response`` lands on the part ``at`` of its page, where the message about it shows (without
    JavaScript the browser scrolls there; the form's own landing may be a screen or more above it)."""
    if at and _FRAGMENT.fullmatch(at):
        response["Location"] = response["Location"].partition("#")[0] + f"#{at}"
    return response


def _note_scope(request: AuthenticatedHttpRequest, writes_topic: str | None = None) -> Scope:
    """The form's scope, if it is the user's own: their notes, one of their agents', or a conversation's (a
    deleted agent's refuses a new note: ``owned_scope``)."""
    raw = request.POST.get("scope", "user")
    try:
        if not raw:
            raise InvalidInput("no scope", code="invalid_scope")
        return owned_scope(user_id=request.user.pk, raw=raw, writes_topic=writes_topic)
    except (InvalidInput, NotFound):
        raise Http404("no such scope") from None


@login_required
@require_POST
def memory_note_delete(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Delete one note (its index line and topic file) as one change: the files go to the Trash, and the tab
    offers an Undo. Works while memory is off too: the notes stay yours to read, edit and delete."""
    scope = _note_scope(request)
    topic = request.POST.get("topic", "").strip()
    try:
        change = notes_services.note_upsert(owner_id=request.user.pk, scope=scope, topic=topic, delete=True,
                                            source=ChangeSet.Source.FILES, actor="you",
                                            note_version=_read_version(request))
    except Conflict as exc:  # changed since the page was loaded: said by the note's row, which shows it now
        at = request.POST.get("at") or None
        flash(request, messages.ERROR, _stale_note(exc, nothing="it was not deleted",
                                                   again="Delete it again if you still want it gone."), at=at)
        return _landing_at(back(request, MEMORY_TAB), at)
    except ApplicationError as exc:
        flash_error(request, exc)
        return back(request, MEMORY_TAB)
    target = request.POST.get("next") or MEMORY_TAB
    path, _, fragment = target.partition("#")
    response = back(request, MEMORY_TAB)
    if response["Location"] == target:  # our own page: come back to it with the Undo
        response["Location"] = f"{path}{'&' if '?' in path else '?'}deleted={change.pk}" + (f"#{fragment}" if fragment else "")
    return response


def _deleted_note(request: AuthenticatedHttpRequest) -> dict | None:
    """The note just deleted on this tab (``?deleted=<change id>``), with what its Undo needs; None if the change
    is not the user's or was not a deletion from this tab."""
    raw = request.GET.get("deleted", "")
    number = whole_number(raw)  # else not one of ours
    deletion = notes_selectors.note_deletion(owner_id=request.user.pk, change_id=number) if number else None
    if deletion is None:
        return None
    return {"change": deletion.change, "undone": deletion.undone, "topic": ", ".join(deletion.topics),
            "next": f"{MEMORY_TAB}?{urlencode({'tab': request.GET.get('tab', 'yours')})}#notes"}


@login_required
@not_found_as_404
@require_http_methods(["GET", "POST"])
def memory_note(request: AuthenticatedHttpRequest) -> HttpResponse:
    """View and edit one note file from the Memory tab (the same editor as Files, with the version check)."""
    path = parse_or_404(request.GET.get("path"))
    if request.method == "POST":
        result = save_file(request, path)
        if result.saved:
            messages.success(request, f"Saved {path}.")
            return redirect(f"/settings/memory/note/?path={path}")
        if result.context.get("gone"):
            return deleted_while_edited(request, path, result)
        return page(request, "web/memory_note.html", result.context, section="memory", status=result.status)
    return page(request, "web/memory_note.html", editor_context(request.user.pk, path), section="memory")


def parse_or_404(raw: str | None) -> str:
    try:
        return parse_path(raw).path
    except ApplicationError:
        raise Http404("not a note path") from None


@login_required
@require_POST
def memory_folder_delete(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Move the notes of a deleted agent or of a conversation to the Trash (restorable from Files)."""
    raw = request.POST.get("folder", "")
    parts = raw.split("/")
    if len(parts) != 3 or parts[0] != "Memory" or parts[1] not in ("agents", "channels"):
        raise Http404("not a notes folder")
    try:
        scope = Scope("agent" if parts[1] == "agents" else "channel", parts[2])
    except ApplicationError:
        raise Http404("not a notes folder") from None
    if scope.kind == "agent" and not agent_scope_gone(owner_id=request.user.pk, scope=scope):
        # Offered for a deleted agent's notes only: a live agent's are forgotten on its own page (or one by one),
        # and a Trash entry would name it deleted.
        raise Http404("not a deleted agent's notes")
    # an agent's by the name it had, as its delete names them (``agents.services.agent_delete``)
    label = (f"Notes of the deleted agent {deleted_agent_names(request.user.pk).get(scope.key, scope.key)}"
             if scope.kind == "agent" else f"Notes of the conversation {scope.key}")
    entry = notes_services.folder_trash(owner_id=request.user.pk, folder=scope.root, label=label)
    if entry is None:
        flash(request, messages.INFO, "There were no notes there.")
    else:
        flash(request, messages.SUCCESS, f"Moved the {label[0].lower()}{label[1:]} to the Trash. You can restore "
                                         "them from Files → Trash.")
    return back(request, MEMORY_TAB)
