"""Files: the Memory folder as a tree; open, edit (a stale edit warns), history and restore, Trash."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from localai_memory.agents.selectors import agent_names, deleted_agent_names
from localai_memory.core.errors import ApplicationError, Conflict, InvalidInput, NotFound
from localai_memory.core.numbers import whole_number
from localai_memory.memory.selectors import file_folder_owned
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import NoteFile
from localai_memory.notes.paths import ROOT, parse_index, parse_path

from .common import AuthenticatedHttpRequest, back, flash_error, int_or_404, not_found_as_404, page


def _path_or_404(raw: str | None) -> str:
    try:
        return parse_path(raw).path
    except ApplicationError:
        raise Http404("not a note path") from None


def deleted_agent_label(agent_id: str, deleted_names: dict[str, str]) -> str:
    """``Deleted agent “Chef”``; ``Deleted agent 7`` for one deleted before names were kept."""
    name = deleted_names.get(agent_id)
    return f"Deleted agent “{name}”" if name else f"Deleted agent {agent_id}"


def folder_label(root: str, names: dict[str, str], deleted_names: dict[str, str]) -> str:
    parts = root.split("/")
    if len(parts) == 1:
        return "Yours"
    if parts[1] == "agents":
        name = names.get(parts[2])
        return f"Agent “{name}”" if name else deleted_agent_label(parts[2], deleted_names)
    return f"Conversation {parts[2]}"


@dataclass
class Folder:
    path: str
    label: str
    files: list[NoteFile] = field(default_factory=list)
    children: list[Folder] = field(default_factory=list)


def build_tree(files: list[NoteFile], names: dict[str, str], deleted_names: dict[str, str]) -> Folder:
    """Memory/ → its files, agents/ and channels/ → one folder per agent or conversation."""
    root = Folder(ROOT, "Memory")
    groups: dict[str, Folder] = {}
    for note in files:
        folder_path = note.path.rsplit("/", 1)[0]
        if folder_path == ROOT:
            root.files.append(note)
            continue
        kind = folder_path.split("/")[1]
        group = groups.get(kind)
        if group is None:
            group = groups[kind] = Folder(f"{ROOT}/{kind}", "agents" if kind == "agents" else "channels")
        leaf = next((c for c in group.children if c.path == folder_path), None)
        if leaf is None:
            leaf = Folder(folder_path, folder_label(folder_path, names, deleted_names))
            group.children.append(leaf)
        leaf.files.append(note)
    root.children = [groups[k] for k in ("agents", "channels") if k in groups]
    return root


def editor_context(owner_id: int, path: str, **extra: Any) -> dict[str, Any]:
    """What the file editor shows: the current text and version, and the index line of a topic file."""
    parsed = parse_path(path)
    note = notes_selectors.access_file(owner_id=owner_id, path=path)
    summary = None
    if not parsed.is_index:
        try:
            entries = notes_selectors.index_entries(owner_id=owner_id, scope=parsed.scope)
        except ApplicationError:
            entries = []
        summary = next((e.summary for e in entries if e.topic == parsed.topic), None)
    names = agent_names(owner_id)
    context = {
        "note": note, "path": note.path, "content": note.content, "version": note.version,
        "is_index": parsed.is_index, "topic": parsed.topic, "summary": summary,
        "folder": folder_label(parsed.scope.root, names, deleted_agent_names(owner_id)),
        "index_path": parsed.scope.index_path,
    }
    context.update(extra)
    return context


def deleted_while_edited(request: AuthenticatedHttpRequest, path: str, result: Any) -> HttpResponse:
    """A save of a file deleted meanwhile (another tab, the Memory tab): the text typed is kept in the New
    file form, so Create brings the file back with it."""
    return files_page(request, new_path=path, new_content=result.context["content"], status=409,
                      new_error=f"{path} was deleted while you edited it. Your text is below: Create brings the "
                                "file back with it (or restore it from the Trash).")


@dataclass
class SaveResult:
    saved: bool
    context: dict[str, Any]
    status: int = 200


def save_file(request: AuthenticatedHttpRequest, path: str) -> SaveResult:
    """Write the edited text with the version it started from; a stale version warns instead of overwriting."""
    content = request.POST.get("content", "").replace("\r\n", "\n")
    raw_version = request.POST.get("version", "")
    version = whole_number(raw_version)
    try:
        file_folder_owned(user_id=request.user.pk, path=path)
        notes_services.file_write(owner_id=request.user.pk, path=path, content=content, version=version)
    except Conflict as exc:
        if exc.code == "no_change":
            return SaveResult(True, {})
        return SaveResult(False, editor_context(request.user.pk, path, stale=True, your_text=content), status=409)
    except NotFound as exc:
        if exc.code != "file_not_found":
            raise
        return SaveResult(False, {"gone": True, "content": content}, status=409)  # deleted while edited
    except ApplicationError as exc:
        return SaveResult(False, editor_context(request.user.pk, path, error=exc.message, content=content),
                          status=exc.status)
    return SaveResult(True, {})


@login_required
@require_GET
def files_home(request: AuthenticatedHttpRequest) -> HttpResponse:
    return files_page(request)


def files_page(request: AuthenticatedHttpRequest, *, new_path: str = "", new_content: str = "",
               new_error: str = "", status: int = 200) -> HttpResponse:
    """The Files page; with ``new_error`` its New file form is open, holding the path and text typed (a
    create refused, or a file deleted while it was edited), so nothing typed is lost."""
    files = list(notes_selectors.file_list(owner_id=request.user.pk))
    tree = build_tree(files, agent_names(request.user.pk), deleted_agent_names(request.user.pk))
    trash_count = notes_selectors.trash_list(owner_id=request.user.pk).count()
    return page(request, "web/files.html", {"tree": tree, "file_count": len(files), "trash_count": trash_count,
                                            "trashed": _trashed(request),
                                            "new_open": bool(new_error), "new_path": new_path,
                                            "new_content": new_content, "new_error": new_error},
                section="files", status=status)


def _trashed(request: AuthenticatedHttpRequest) -> Any:
    """The Trash entry a delete just made (``?trashed=<id>``), while it is still in the Trash, for the notice
    and its Undo; None if it is not the user's or was restored since."""
    number = whole_number(request.GET.get("trashed", ""))
    if not number:
        return None
    try:
        entry = notes_selectors.access_trash(owner_id=request.user.pk, entry_id=number)
    except NotFound:
        return None
    return entry if entry.restored_at is None else None


@login_required
@not_found_as_404
@require_http_methods(["GET", "POST"])
def file_open(request: AuthenticatedHttpRequest) -> HttpResponse:
    path = _path_or_404(request.GET.get("path"))
    if request.method == "POST":
        result = save_file(request, path)
        if result.saved:
            messages.success(request, f"Saved {path}.")
            return redirect(f"/files/open/?path={path}")
        if result.context.get("gone"):
            return deleted_while_edited(request, path, result)
        return page(request, "web/file_open.html", result.context, section="files", status=result.status)
    return page(request, "web/file_open.html", editor_context(request.user.pk, path), section="files")


@login_required
@require_POST
def file_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Create a file (never overwrites: a path that exists is refused)."""
    raw = request.POST.get("path", "").strip()
    if raw and not raw.startswith(ROOT + "/"):
        raw = f"{ROOT}/{raw}"
    content = request.POST.get("content", "").replace("\r\n", "\n")
    try:
        path = parse_path(raw).path
        file_folder_owned(user_id=request.user.pk, path=path)
        notes_services.file_write(owner_id=request.user.pk, path=path, content=content, version=None)
    except ApplicationError as exc:  # the form stays open with what was typed
        return files_page(request, new_path=raw, new_content=content, new_error=exc.message, status=exc.status)
    messages.success(request, f"Created {path}.")
    return redirect(f"/files/open/?path={path}")


@login_required
@not_found_as_404
@require_GET
def file_history(request: AuthenticatedHttpRequest) -> HttpResponse:
    path = _path_or_404(request.GET.get("path"))
    versions = list(notes_selectors.file_history(owner_id=request.user.pk, path=path))
    try:
        notes_selectors.access_file(owner_id=request.user.pk, path=path)
        exists = True
    except NotFound:
        exists = False
    current = versions[0].version if versions and exists and not versions[0].deleted else None
    return page(request, "web/file_history.html", {"path": path, "versions": versions, "current": current,
                                                   "exists": exists}, section="files")


@login_required
@not_found_as_404
@require_POST
def file_restore_version(request: AuthenticatedHttpRequest) -> HttpResponse:
    path = _path_or_404(request.POST.get("path"))
    version = int_or_404(request.POST.get("version"))
    try:
        file_folder_owned(user_id=request.user.pk, path=path)
        notes_services.version_restore(owner_id=request.user.pk, path=path, version=version)
    except Conflict as exc:
        messages.info(request, exc.message if exc.code != "no_change" else
                      f"Version {version} is already the current text.")
    except ApplicationError as exc:
        if isinstance(exc, NotFound):
            raise
        flash_error(request, exc)
    else:
        messages.success(request, f"Restored version {version} of {path}. The text before is kept in the history.")
    return redirect(f"/files/history/?path={path}")


@login_required
@not_found_as_404
@require_http_methods(["GET", "POST"])
def file_delete(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Move a file to the Trash; the Files page then says so with an Undo. An index takes every note of its
    folder with it, so it asks first, on a page that says how many (GET, or a POST without ``confirm``), as
    Forget everything and Delete chat do."""
    path = _path_or_404(request.POST.get("path") if request.method == "POST" else request.GET.get("path"))
    if request.method == "GET" or (parse_path(path).is_index and request.POST.get("confirm") != "yes"):
        return _delete_confirm(request, path)
    raw_version = request.POST.get("version", "")
    version = whole_number(raw_version)
    try:
        if raw_version and version is None:  # left out, it is not checked (as in the API); bad, it is refused
            raise InvalidInput(f"{path}: the version must be a whole number; nothing was deleted.",
                               code="invalid_version")
        entry = notes_services.file_delete(owner_id=request.user.pk, path=path, version=version)
    except (Conflict, InvalidInput) as exc:
        flash_error(request, exc)
        return redirect(f"/files/open/?path={path}")
    return back(request, f"/files/?trashed={entry.pk}")  # the Files page, with the notice and its Undo


def _delete_confirm(request: AuthenticatedHttpRequest, path: str) -> HttpResponse:
    """"Move … to the Trash?": what goes with the file (for an index: its notes, by topic, and the topic files
    beside it) and that the Trash gives it back."""
    parsed = parse_path(path)
    note = notes_selectors.access_file(owner_id=request.user.pk, path=path)
    topics: list[str] | None = []
    topic_files = 0
    if parsed.is_index:
        try:
            topics = [entry.topic for entry in parse_index(note.content)]
        except ApplicationError:
            topics = None  # an index edited into a shape the parser refuses: its notes cannot be counted
        folder = parsed.scope.root + "/"
        topic_files = sum(1 for other in notes_selectors.file_list(owner_id=request.user.pk,
                                                                   folder=parsed.scope.root)
                          .values_list("path", flat=True) if other != path and "/" not in other[len(folder):])
    version = request.POST.get("version") or note.version
    return page(request, "web/file_delete.html", {"path": path, "version": version, "is_index": parsed.is_index,
                                                  "topics": topics, "topic_files": topic_files},
                section="files")


@login_required
@require_GET
def trash(request: AuthenticatedHttpRequest) -> HttpResponse:
    entries = list(notes_selectors.trash_list(owner_id=request.user.pk))
    return page(request, "web/trash.html", {"entries": entries}, section="files")


@login_required
@not_found_as_404
@require_POST
def trash_restore(request: AuthenticatedHttpRequest, entry_id: int) -> HttpResponse:
    entry = notes_selectors.access_trash(owner_id=request.user.pk, entry_id=entry_id)
    try:
        change = notes_services.trash_restore(owner_id=request.user.pk, entry_id=entry.pk)
    except (Conflict, notes_services.CapExceeded) as exc:  # back again since, or past a cap: say which
        flash_error(request, exc)
    else:
        messages.success(request, f"{change.summary}.")
    return back(request, "/files/trash/")
