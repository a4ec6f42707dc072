"""Agents: the list, the form with its Memory section, delete (with what happens to the notes), export, import.

The form sends ``mine_and_own`` for a new agent (the spec's default for new agents); an agent saved before the
field existed shows "As before" until its owner picks one of the clearer choices.
"""

from __future__ import annotations

import secrets
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from localai_memory.agents import selectors as agent_selectors
from localai_memory.agents import services as agent_services
from localai_memory.agents.models import Agent, AgentMemory
from localai_memory.core.errors import ApplicationError
from localai_memory.core.parsers import json_loads
from localai_memory.memory.providers import namespaced_addons
from localai_memory.memory.selectors import addons_used, memory_state

from .common import AuthenticatedHttpRequest, not_found_as_404, page

AS_BEFORE = "as_before"
MEMORY_CHOICES = [
    (AgentMemory.MINE_AND_OWN, "Mine and its own", ("Reads your notes and the agent's own; a note goes to the "
                                                   "agent's own notes.")),
    (AgentMemory.OWN, "Its own only", "Reads and saves only the agent's own notes."),
    (AgentMemory.MINE, "Mine", "Reads and saves your notes; every chat of yours sees what it saves."),
    (AgentMemory.NONE, "None", "Reads nothing and saves nowhere."),
]
AS_BEFORE_DESC = ("This agent has no memory choice: it was saved before memory choices existed, or without one. "
                  "It reads your notes and its own when its "
                  "Add-ons list names memory, and the model chooses where a note goes. Pick one of the clearer "
                  "choices below to change that.")
SAVE_RULES = [
    ("use_mine", "Use my setting", "Follow the choice on your Memory tab."),
    ("always", "Always confirm", "Every note this agent proposes waits for your confirmation."),
    ("never", "Never", "This agent never saves a note."),
]
MEMORY_LABELS: dict[str, str] = {value: label for value, label, _ in MEMORY_CHOICES}
SAVE_LABELS = {value: label for value, label, _ in SAVE_RULES}
DELETE_CHOICES = [
    ("keep", "Keep", "The notes stay. They show on the Memory tab under Deleted agents until you delete them."),
    ("export", "Export then delete", "Download the notes as a zip file, then move them to the Trash."),
    ("delete", "Delete", "Move the notes to the Trash. You can restore them from Files."),
]
#: An agent with no notes here whose notes a memory add-on may hold (it keeps namespaces).
ADDON_DELETE_CHOICES = [
    ("keep", "Keep", "Its notes stay in the memory add-on."),
    ("delete", "Delete", "Ask the memory add-on to drop its notes. This cannot be undone."),
]
EXPORT_TTL_SECONDS = 15 * 60


def memory_label(agent: Agent) -> str:
    return MEMORY_LABELS.get(agent.memory, "As before") if agent.memory else "As before"


@login_required
@require_GET
def agent_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    agents = list(agent_selectors.agent_list(owner_id=request.user.pk))
    rows = [{"agent": a, "memory": memory_label(a), "rule": SAVE_LABELS.get(a.memory_save or "use_mine")}
            for a in agents]
    download = request.GET.get("download")
    return page(request, "web/agents.html", {"rows": rows, "download": download if download and
                                                   download.isalnum() else None}, section="agents")


def _form_context(request: AuthenticatedHttpRequest, agent: Agent | None,
                  values: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    state = memory_state(user_id=request.user.pk)
    if values is None:
        if agent is None:
            values = {"name": "", "instructions": "", "memory": AgentMemory.MINE_AND_OWN, "memory_save": "use_mine",
                      "tools_memory": True, "grant_write": True}
        else:
            values = {"name": agent.name, "instructions": agent.instructions,
                      "memory": agent.memory or AS_BEFORE, "memory_save": agent.memory_save or "use_mine",
                      "tools_memory": agent.tools_memory, "grant_write": agent.grant_write}
    effective = agent_selectors.agent_memory_effective(agent=agent, state=state) if agent else None
    return {"agent": agent, "values": values, "error": error, "memory_choices": MEMORY_CHOICES,
            "save_rules": SAVE_RULES, "as_before": agent is not None and agent.memory is None,
            "as_before_desc": AS_BEFORE_DESC, "memory_off": not state.enabled, "effective": effective,
            "memory_off_line": agent_selectors.MEMORY_OFF_IN_SETTINGS}


def _with(items: list[str], name: str, present: bool) -> list[str]:
    items = [item for item in items if item != name]
    return [*items, name] if present else items


def _posted(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    return {
        "name": request.POST.get("name", ""),
        "instructions": request.POST.get("instructions", "").replace("\r\n", "\n"),
        "memory": request.POST.get("memory", ""),
        "memory_save": request.POST.get("memory_save", "use_mine"),
        "tools_memory": request.POST.get("tools_memory") == "on",
        "grant_write": request.POST.get("grant_write") == "on",
    }


@login_required
@require_http_methods(["GET", "POST"])
def agent_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    if request.method == "POST":
        values = _posted(request)
        try:
            agent = agent_services.agent_create(
                owner_id=request.user.pk, name=values["name"], instructions=values["instructions"],
                tools=_with([], "memory", values["tools_memory"]),
                grants=_with([], "memory.write", values["grant_write"]),
                memory=values["memory"] or AgentMemory.MINE_AND_OWN, memory_save=values["memory_save"])
        except ApplicationError as exc:
            return page(request, "web/agent_form.html", _form_context(request, None, values, exc.message),
                        section="agents", status=exc.status)
        messages.success(request, f"Saved the agent “{agent.name}”.")
        return redirect("/agents/")
    return page(request, "web/agent_form.html", _form_context(request, None), section="agents")


@login_required
@not_found_as_404
@require_http_methods(["GET", "POST"])
def agent_edit(request: AuthenticatedHttpRequest, agent_id: int) -> HttpResponse:
    agent = agent_selectors.access_agent(request.user.pk, agent_id)
    if request.method == "POST":
        values = _posted(request)
        changes: dict[str, Any] = {
            "name": values["name"], "instructions": values["instructions"],
            "tools": _with(list(agent.tools or []), "memory", values["tools_memory"]),
            "grants": _with(list(agent.grants or []), "memory.write", values["grant_write"]),
            "memory_save": values["memory_save"],
        }
        if values["memory"] != AS_BEFORE:  # "As before" stays as it is until a clearer choice is picked
            changes["memory"] = values["memory"]
        try:
            agent = agent_services.agent_update(owner_id=request.user.pk, agent_id=agent.pk, **changes)
        except ApplicationError as exc:
            return page(request, "web/agent_form.html", _form_context(request, agent, values, exc.message),
                        section="agents", status=exc.status)
        messages.success(request, f"Saved the agent “{agent.name}”.")
        return redirect("/agents/")
    return page(request, "web/agent_form.html", _form_context(request, agent), section="agents")


@login_required
@not_found_as_404
@require_http_methods(["GET", "POST"])
def agent_delete(request: AuthenticatedHttpRequest, agent_id: int) -> HttpResponse:
    agent = agent_selectors.access_agent(request.user.pk, agent_id)
    files = agent_selectors.agent_note_count(owner_id=request.user.pk, agent_id=agent.pk)
    # A memory add-on that keeps namespaces may hold the agent's notes, though it has no files here: the
    # choice is asked then too (Keep by default; Delete asks the add-on to drop them, which cannot be undone).
    addons = namespaced_addons(addons_used(user_id=request.user.pk))
    context = {"agent": agent, "files": files, "addons": addons,
               "choices": DELETE_CHOICES if files else ADDON_DELETE_CHOICES}
    if request.method == "POST":
        choice = request.POST.get("memory") if files or addons else None
        try:
            result = agent_services.agent_delete(owner_id=request.user.pk, agent_id=agent.pk, memory=choice)
        except ApplicationError as exc:
            return page(request, "web/agent_delete.html", {**context, "error": exc.message},
                        section="agents", status=exc.status)
        # an add-on that could not drop the agent's notes is a warning: they may still be there
        said = messages.success if all(a.status == "forgot" for a in result.addons) else messages.warning
        said(request, result.message)
        if result.archive is not None:
            # The zip is taken under the same lock as the move to the Trash; it waits 15 minutes to be fetched.
            token = secrets.token_urlsafe(18).replace("-", "a").replace("_", "b")
            name = f"agent-{result.agent_id}-{slugify(result.name)[:40] or 'agent'}-notes.zip"
            cache.set(_export_key(request.user.pk, token), {"name": name, "body": result.archive},
                      EXPORT_TTL_SECONDS)
            return redirect(f"/agents/?download={token}")
        return redirect("/agents/")
    return page(request, "web/agent_delete.html", context, section="agents")


def _export_key(user_id: int, token: str) -> str:
    return f"web:agent-notes-export:{user_id}:{token}"


@login_required
@require_GET
def agent_notes_download(request: AuthenticatedHttpRequest, token: str) -> HttpResponse:
    """The zip of a deleted agent's notes (Export then delete), for 15 minutes after the delete."""
    item = cache.get(_export_key(request.user.pk, token))
    if not item:
        raise Http404("This download has expired; the notes are in the Trash.")
    response = HttpResponse(item["body"], content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{item["name"]}"'
    return response


@login_required
@not_found_as_404
@require_GET
def agent_export(request: AuthenticatedHttpRequest, agent_id: int) -> HttpResponse:
    agent = agent_selectors.access_agent(request.user.pk, agent_id)
    response = JsonResponse(agent_selectors.agent_export(agent=agent), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = (f'attachment; filename="agent-{agent.pk}-'
                                       f'{slugify(agent.name)[:40] or "agent"}.json"')
    return response


IMPORT_MAX_BYTES = 256 * 1024


@login_required
@require_POST
def agent_import(request: AuthenticatedHttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose an agent file to import.")
        return redirect("/agents/")
    if cast(int, upload.size) > IMPORT_MAX_BYTES:  # an uploaded file always has its size
        messages.error(request, f"An agent file is at most {IMPORT_MAX_BYTES // 1024} KiB.")
        return redirect("/agents/")
    try:
        document = json_loads(upload.read().decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or nested too deep
        messages.error(request, "That file is not an agent export (it is not JSON).")
        return redirect("/agents/")
    try:
        agent = agent_services.agent_import(owner_id=request.user.pk, document=document)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect("/agents/")
    messages.success(request, f"Imported the agent “{agent.name}” (with the same memory choices and no notes).")
    return redirect("/agents/")
