"""Import: the export zip back into an account, or a plain list of facts copied out of another assistant.

* An export zip into an account without notes is written back exactly (byte-identical files, one change
  set). Into an account with notes it is merged topic by topic: a topic the account lacks is added, a topic
  that says something else becomes a proposal showing old and new, an identical one is left alone. A note
  the owner deleted (its line is in their Trash) becomes a proposal too, and a stray file they deleted is
  skipped: an import does not undo a delete on its own. Nothing is ever overwritten silently.
* A list of facts (one a line; bullets and numbering are dropped) becomes notes of the user's own scope per
  the policy: saved at once only where the owner's save level says so (and within the policy's limits),
  otherwise proposals; refused as a whole where the policy refuses. A fact a note says already (the same
  words and emoji, or near enough: ``ranking.is_duplicate``) is left ``unchanged``; a negation in any of the
  languages it knows, another number or other emoji makes it a new fact.

An agent's or a conversation's folder goes to this account's agent or bot it belongs to, never to an id of
another account. An export made in this very account (the ``account`` its ``FOLDERS_FILE`` records) goes by
the ids, which stay with an agent or a bot through a rename: a folder whose agent (bot) was renamed since goes
back to it, and is listed under ``renamed``. Ids differ between accounts and servers, so any other export goes
by the names it records to this account's agent of that name (the bot of that name and platform), and is
listed under ``moved``. The notes of an agent deleted since (or before the export) go back to the notes kept
from it (the Memory tab's Deleted agents), listed under ``deleted_agents``; a conversation of a bot the owner
removed, to the notes left from it (they stay when a bot is removed), listed under ``removed_bots``: no chat
reads either. A folder with no such place is not imported (no chat would read it): it is listed under
``skipped`` with the reason and what to do; the zip still holds it. So every folder of the zip is in the answer where it did not simply go back to its agent.

Both are refused while memory is off (``check_memory_on``); only facts follow the save level (a zip is the
person's own notes written back: Never stops the assistant, not them).

An import never passes a cap: the whole import is checked first and refused with the current listing, and it
runs in one transaction, so nothing is half-imported. The zip is read defensively: only ``Memory/…`` note
paths, no traversal, no links, no encryption, bounded sizes, UTF-8 text.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from localai_memory.core.errors import ApplicationError, Forbidden, InvalidInput, TooLarge
from localai_memory.core.parsers import json_loads
from localai_memory.memory import policy
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import AlreadySaved, proposal_create, proposal_list
from localai_memory.memory.providers import ADDON_EXPORT_FOLDER
from localai_memory.memory.selectors import topics_in_use
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet, NoteFile, TrashFile
from localai_memory.notes.paths import (
    ROOT,
    SUMMARY_MAX_CHARS,
    TOPIC_MAX_BYTES,
    IndexEntry,
    Scope,
    check_own_files,
    check_topic,
    index_over_caps,
    index_size,
    parse_index,
    parse_path,
    render_index,
)
from localai_memory.notes.services import (
    FOLDERS_FILE,
    IMPORTANCE_FILE,
    apply_changes,
    cap_error,
    check_importance,
    importance_change,
    lock_owner,
)
from localai_memory.recall.ranking import Candidate as RankCandidate
from localai_memory.recall.ranking import is_duplicate

from .parsing import one_line, slugify
from .selectors import note_author, owner_context

#: The largest zip accepted (the API's body limit is the other bound).
ZIP_MAX_BYTES = 1024 * 1024
#: Everything in one zip together, uncompressed.
UNCOMPRESSED_MAX_BYTES = 4 * 1024 * 1024
#: Files in one zip.
MAX_MEMBERS = 2000
#: Facts in one list.
MAX_FACTS = 200
FACTS_MAX_CHARS = 64 * 1024

_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)]|\[[ xX]?\])\s+")
_S_IFMT, _S_IFLNK = 0o170000, 0o120000


@dataclass
class ImportResult:
    kind: str  # zip or facts
    mode: str  # restored (empty account), merged, facts
    written: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)  # "<scope root>/<topic>" added at once
    proposals: list[int] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)  # suggestions made before that hold a fact already
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}: a file, or a folder ("…/")
    moved: list[dict[str, str]] = field(default_factory=list)  # {"from", "to", "name"}: a folder to its agent/bot
    # {"folder", "name", "now"}: a folder back to its own agent/bot, which the export knew as ``name``
    renamed: list[dict[str, str]] = field(default_factory=list)
    # {"folder", "name"}: a folder to the notes kept from a deleted agent (``name``: as Deleted agents shows it)
    deleted_agents: list[dict[str, str]] = field(default_factory=list)
    # {"folder", "name", "platform"}: a conversation's folder back to the notes left from a bot the owner removed
    # (its name and platform as the export records them; "" when it names none)
    removed_bots: list[dict[str, str]] = field(default_factory=list)
    change_id: int | None = None
    importances: int = 0  # notes given the importance the export recorded

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": self.mode, "written": self.written, "added": self.added,
                "proposals": self.proposals, "unchanged": self.unchanged, "waiting": self.waiting,
                "skipped": self.skipped, "moved": self.moved, "renamed": self.renamed,
                "deleted_agents": self.deleted_agents, "removed_bots": self.removed_bots, "change_id": self.change_id,
                "importances": self.importances}


# --------------------------------------------------------------------------------------------------------
# Reading a zip
# --------------------------------------------------------------------------------------------------------


def _bad(message: str, **details: Any) -> InvalidInput:
    return InvalidInput(message, code="invalid_import", details=details or None)


def read_export_zip(data: bytes) -> dict[str, str]:
    """The note files of an export zip as ``{path: text}``; InvalidInput/TooLarge for anything unsafe."""
    if len(data) > ZIP_MAX_BYTES:
        raise TooLarge(f"The zip is larger than {ZIP_MAX_BYTES} bytes.", code="import_too_large")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError):
        raise _bad("This is not a zip file; export your notes with Export and import that file.") from None
    files: dict[str, str] = {}
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise TooLarge(f"The zip holds more than {MAX_MEMBERS} entries.", code="import_too_large")
        total = 0
        for info in infos:
            name = info.filename
            if name.startswith(ADDON_EXPORT_FOLDER + "/") and ".." not in name.split("/"):
                continue  # what a memory add-on exported beside the notes is the add-on's to import
            if name == IMPORTANCE_FILE:
                continue  # read by ``read_export_importances``
            if name == FOLDERS_FILE:
                continue  # read by ``read_export_folders``
            if name.endswith("/"):
                if name == ROOT + "/" or name.startswith(ROOT + "/") and ".." not in name.split("/"):
                    continue  # a folder entry of the export layout
                raise _bad(f"{name!r} is not a note folder; only Memory/… may be imported.", path=name)
            try:
                parsed = parse_path(name)
            except InvalidInput as exc:
                raise _bad(f"{name!r}: {exc.message}", path=name) from None
            if parsed.path != name:
                raise _bad(f"{name!r} is not a plain note path (expected {parsed.path!r}).", path=name)
            if (info.external_attr >> 16) & _S_IFMT == _S_IFLNK:
                raise _bad(f"{name!r} is a link; only plain files may be imported.", path=name)
            if info.flag_bits & 0x1:
                raise _bad(f"{name!r} is encrypted.", path=name)
            if name in files:
                raise _bad(f"{name!r} is in the zip twice.", path=name)
            if info.file_size > TOPIC_MAX_BYTES:
                raise _bad(f"{name!r} is larger than {TOPIC_MAX_BYTES} bytes; Memory is for short notes.",
                           path=name)
            total += info.file_size
            if total > UNCOMPRESSED_MAX_BYTES:
                raise TooLarge(f"The zip unpacks to more than {UNCOMPRESSED_MAX_BYTES} bytes.",
                               code="import_too_large")
            try:
                with archive.open(info) as member:
                    raw = member.read(TOPIC_MAX_BYTES + 1)
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
                raise _bad(f"{name!r} cannot be read: {exc}", path=name) from None
            if len(raw) > TOPIC_MAX_BYTES or len(raw) != info.file_size:
                raise _bad(f"{name!r} is not what the zip says it is.", path=name)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _bad(f"{name!r} is not UTF-8 text.", path=name) from None
            if "\x00" in text:
                raise _bad(f"{name!r} holds NUL characters.", path=name)
            files[name] = text
    if not files:
        raise _bad("The zip holds no notes (Memory/index.md, Memory/<topic>.md, …).")
    return files


#: The largest ``IMPORTANCE_FILE`` an import reads (an entry is ~70 bytes; a user has a few hundred notes).
IMPORTANCE_FILE_MAX_BYTES = 256 * 1024


def _export_json(data: bytes, name: str) -> Any:
    """The JSON file ``name`` Export writes beside the notes, or None when the zip has none; one larger than
    ``IMPORTANCE_FILE_MAX_BYTES`` or not JSON is refused (413, 400)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # read_export_zip checked the zip already
        try:
            info = archive.getinfo(name)
        except KeyError:
            return None
        if info.file_size > IMPORTANCE_FILE_MAX_BYTES:
            raise TooLarge(f"{name} is larger than {IMPORTANCE_FILE_MAX_BYTES} bytes.", code="import_too_large")
        try:
            with archive.open(info) as member:
                return json_loads(member.read(IMPORTANCE_FILE_MAX_BYTES + 1).decode("utf-8"))
        except (ValueError, zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError) as exc:
            raise _bad(f"{name} is not the JSON Export writes: {exc}", path=name) from None


def read_export_importances(data: bytes) -> dict[tuple[Scope, str], float]:
    """The importances an export zip records (``IMPORTANCE_FILE``): ``(scope, topic)`` → 0..1; empty when
    the zip has none. A file that is not what Export writes is a 400 that says what is wrong."""
    body = _export_json(data, IMPORTANCE_FILE)
    if body is None:
        return {}
    entries = body.get("importance") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise _bad(f'{IMPORTANCE_FILE} must hold {{"importance": [{{"scope", "topic", "importance"}}, …]}}.',
                   path=IMPORTANCE_FILE)
    weights: dict[tuple[Scope, str], float] = {}
    for number, entry in enumerate(entries, start=1):
        try:
            if not isinstance(entry, dict):
                raise InvalidInput("each entry must be an object with scope, topic and importance")
            value = check_importance(entry.get("importance"))
            if value is None:
                raise InvalidInput("importance must be a number from 0 to 1")
            weights[(Scope.parse(entry.get("scope")), check_topic(entry.get("topic")))] = value
        except InvalidInput as exc:
            raise _bad(f"{IMPORTANCE_FILE}, entry {number}: {exc.message}", path=IMPORTANCE_FILE) from None
    return weights


@dataclass(frozen=True)
class Holder:
    """Whose a folder was where the export was made (``FOLDERS_FILE``): an agent's name (``deleted``: only
    its kept notes were left), or a bot's name and platform for a conversation's folder."""

    name: str
    platform: str = ""
    deleted: bool = False


#: The longest name a folder's record may give (an agent's and a bot's name hold 100 characters).
HOLDER_NAME_MAX_CHARS = 100
#: The longest account mark a folder's record may give (``account_mark`` writes 32 characters).
ACCOUNT_MARK_MAX_CHARS = 64


@dataclass(frozen=True)
class ExportFolders:
    """An export's ``FOLDERS_FILE``: whose each folder was, and the mark of the account it was made in (None
    in an export made before exports recorded it)."""

    holders: dict[Scope, Holder] = field(default_factory=dict)
    account: str | None = None


def read_export_folders(data: bytes) -> ExportFolders:
    """Whose each agent's and conversation's folder was, as the export records it (``FOLDERS_FILE``), and
    which account it was made in; nothing when the zip has no record (an older export). A record that is not
    what Export writes is a 400."""
    body = _export_json(data, FOLDERS_FILE)
    if body is None:
        return ExportFolders()
    entries = body.get("folders") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise _bad(f'{FOLDERS_FILE} must hold {{"folders": [{{"folder", "agent"}} or {{"folder", "bot", '
                   f'"platform"}}, …]}}.', path=FOLDERS_FILE)
    account = body.get("account")
    if account is not None and (not isinstance(account, str) or not account
                                or len(account) > ACCOUNT_MARK_MAX_CHARS):
        raise _bad(f"{FOLDERS_FILE}: account must be the mark Export writes, or left out.", path=FOLDERS_FILE)
    holders: dict[Scope, Holder] = {}
    for number, entry in enumerate(entries, start=1):
        try:
            if not isinstance(entry, dict):
                raise InvalidInput("each entry must be an object with folder and agent, or folder, bot and "
                                   "platform")
            folder = entry.get("folder")
            try:
                scope = parse_path(f"{folder}/index.md").scope if isinstance(folder, str) else None
            except InvalidInput:
                scope = None
            if scope is None or scope.kind == "user" or scope.root != folder:
                raise InvalidInput("folder must be Memory/agents/<id> or Memory/channels/<key>")
            name = entry.get("agent" if scope.kind == "agent" else "bot")
            platform = entry.get("platform", "") if scope.kind == "channel" else ""
            deleted = entry.get("deleted", False) if scope.kind == "agent" else False
            if not isinstance(name, str) or not name.strip() or len(name) > HOLDER_NAME_MAX_CHARS:
                raise InvalidInput(f"{'agent' if scope.kind == 'agent' else 'bot'} must be its name")
            if not isinstance(platform, str) or (scope.kind == "channel" and not platform):
                raise InvalidInput("platform must name the bot's platform")
            if not isinstance(deleted, bool):
                raise InvalidInput("deleted must be true or false")
            holders[scope] = Holder(name=name, platform=platform, deleted=deleted)
        except InvalidInput as exc:
            raise _bad(f"{FOLDERS_FILE}, entry {number}: {exc.message}", path=FOLDERS_FILE) from None
    return ExportFolders(holders=holders, account=account)


@dataclass
class _Placement:
    """Where the folders of a zip go in the importing account (see ``_place_folders``)."""

    to: dict[Scope, Scope] = field(default_factory=dict)  # every folder imported, to where (often itself)
    skipped: list[dict[str, str]] = field(default_factory=list)
    moved: list[dict[str, str]] = field(default_factory=list)
    renamed: list[dict[str, str]] = field(default_factory=list)
    deleted_agents: list[dict[str, str]] = field(default_factory=list)
    removed_bots: list[dict[str, str]] = field(default_factory=list)

    def path(self, path: str) -> str | None:
        """Where the zip's file ``path`` goes; None when its folder is not imported."""
        scope = parse_path(path).scope
        target = self.to.get(scope)
        return None if target is None else target.root + path[len(scope.root):]


def _place_folders(*, owner_id: int, scopes: set[Scope], folders: ExportFolders) -> _Placement:
    """Where each folder of the zip goes in the owner's account: their own notes stay theirs; an agent's
    folder goes to the owner's agent it belongs to, a conversation's to the conversation of the owner's bot.
    Call under the owner's note lock (deleting an agent holds it, so the answer stands for the write).

    An export made in this account (``folders.account``) names the owner's own agents and bots by their ids,
    which no rename changes: a folder of one of them goes back to it whatever it is called now. Otherwise a
    folder whose id is one of the owner's agents (bots) stays where it is, and so does the kept folder of
    one they deleted, unless the export names another agent (bot) for it; then the export's record of its
    name decides: the owner's one agent of that name (bot of that name and platform) takes it, under its
    own id. Anything else — an id of another account, of nobody, or a name none or several of the owner's
    agents have — is skipped with the reason: no import writes into another account's ids, nor makes notes
    no chat of the owner would read. Two folders that would land in one are not merged: the one already in
    place (else the first) goes, the other is skipped."""
    from localai_memory.memory.selectors import account_mark

    holders = folders.holders
    ours = folders.account is not None and constant_time_compare(folders.account, account_mark(owner_id=owner_id))
    placement = _Placement()
    placement.to.update({s: s for s in scopes if s.kind == "user"})
    held = {path.split("/")[2] for path in NoteFile.objects.filter(
        owner_id=owner_id, path__startswith=f"{ROOT}/").exclude(path__regex=r"^Memory/[^/]+$")
        .values_list("path", flat=True).distinct()}  # the keys of the owner's agent and conversation folders
    wanted: dict[Scope, Scope | str] = {}  # where a folder would go, or why it cannot
    names: dict[Scope, _Names] = {}
    agents = sorted((s for s in scopes if s.kind == "agent"), key=lambda s: int(s.key))
    if agents:
        wanted.update(_place_agents(owner_id=owner_id, scopes=agents, holders=holders, held=held, ours=ours,
                                    names=names))
    channels = sorted((s for s in scopes if s.kind == "channel"), key=lambda s: s.root)
    if channels:
        wanted.update(_place_channels(owner_id=owner_id, scopes=channels, holders=holders, held=held, ours=ours,
                                      names=names))
    placement.skipped += [_skip(scope, reason) for scope, reason in wanted.items() if isinstance(reason, str)]
    places = {scope: target for scope, target in wanted.items() if isinstance(target, Scope)}
    taken: dict[Scope, Scope] = {}
    for scope in sorted(places, key=lambda s: (places[s] != s, s.kind, len(s.key), s.key)):  # in place first
        target = places[scope]
        if target in taken:
            placement.skipped.append(_skip(scope, (
                f"another folder of the zip, {taken[target].root}/, goes to {target.root}/ already, and two "
                "folders are not merged into one. Import this one on its own.")))
            continue
        taken[target] = scope
        placement.to[scope] = target
        holder = holders.get(scope)
        now = names.get(target)
        if target != scope:
            placement.moved.append({"from": f"{scope.root}/", "to": f"{target.root}/", "name": holders[scope].name})
        elif now is not None and now.deleted and scope.kind == "channel":  # no chat reads them: said, as below
            placement.removed_bots.append({"folder": f"{target.root}/", "name": now.name, "platform": now.platform})
        elif now is not None and now.deleted:
            placement.deleted_agents.append({"folder": f"{target.root}/", "name": now.name})
        elif now is not None and holder is not None and now.name != holder.name:
            placement.renamed.append({"folder": f"{target.root}/", "name": holder.name, "now": now.name})
    return placement


@dataclass(frozen=True)
class _Names:
    """What the owner's agent (bot) of a folder is called now; ``deleted``: the name a deleted agent had, or a
    bot the owner removed (its ``platform``; both "" when the export does not name it)."""

    name: str
    deleted: bool = False
    platform: str = ""


def _not_this_account(what: str, now: str, holder: Holder) -> str:
    """What to do when the folder's id is the owner's ``what`` (their agent, their bot) called ``now``, but the
    export is not shown to be of this account, so the name it records is all that tells whose the notes are."""
    return (f" Your {what} “{now}” has this folder's id; if it is the one these notes were made with, renamed "
            f"since, name it “{holder.name}” for the import: this export does not show that it was made in this "
            "account, so the id alone does not tell.")


def _place_agents(*, owner_id: int, scopes: list[Scope], holders: dict[Scope, Holder], held: set[str], ours: bool,
                  names: dict[Scope, _Names]) -> dict[Scope, Scope | str]:
    """``_place_folders`` for agents' folders: each to an agent's folder of the owner, or why not. Fills
    ``names`` with what the owner's agents of the folders are called now."""
    from localai_memory.agents.models import Agent, DeletedAgent
    from localai_memory.agents.selectors import agent_names, deleted_agent_names

    mine, deleted = agent_names(owner_id), deleted_agent_names(owner_id)
    names.update({Scope.agent(key): _Names(name) for key, name in mine.items()})
    names.update({Scope.agent(key): _Names(name, deleted=True) for key, name in deleted.items()})
    ids = [int(s.key) for s in scopes]
    live = {str(pk) for pk in Agent.objects.filter(pk__in=ids).values_list("pk", flat=True)}
    others = {str(pk) for pk in DeletedAgent.objects.filter(agent_id__in=ids).exclude(owner_id=owner_id)
              .values_list("agent_id", flat=True)}
    places: dict[Scope, Scope | str] = {}
    for scope in scopes:
        holder = holders.get(scope)
        # the kept notes of an agent the owner deleted: no live agent's, nobody else's
        kept = (scope.key in deleted or scope.key in held) and scope.key not in live | others
        if kept and scope not in names:
            names[scope] = _Names(holder.name if holder else f"agent {scope.key}", deleted=True)
        if holder is None:
            places[scope] = scope if scope.key in mine or kept else (
                f"agent {scope.key} is not one of your agents, and the export does not say which agent it was. "
                "To bring these notes to one of your agents, rename the folder in the zip to "
                "Memory/agents/<that agent's id>/ and import the zip again.")
            continue
        if ours and scope.key in mine:
            places[scope] = scope  # the very agent, by the id it keeps through a rename
            continue
        if holder.deleted:
            places[scope] = scope if kept else (
                f"these are the notes kept from “{holder.name}”, an agent deleted before the export, and no "
                "agent of yours reads them.")
            continue
        same = sorted((key for key, name in mine.items() if name == holder.name), key=int)
        if scope.key in same:
            places[scope] = scope
        elif len(same) == 1:
            places[scope] = Scope.agent(same[0])
        elif same:
            places[scope] = (f"{len(same)} of your agents are named “{holder.name}”, so the import cannot tell "
                             "which one these notes are for. Rename all but one of them, then import the zip again.")
        elif kept and (ours or deleted.get(scope.key) == holder.name):
            places[scope] = scope  # the agent was deleted here since (renamed first, or not): its kept folder
        else:
            places[scope] = (f"none of your agents is named “{holder.name}”, whose notes these are. Make or "
                             "import an agent of that name, then import the zip again."
                             + (_not_this_account("agent", mine[scope.key], holder) if scope.key in mine else ""))
    return places


def _place_channels(*, owner_id: int, scopes: list[Scope], holders: dict[Scope, Holder], held: set[str],
                    ours: bool, names: dict[Scope, _Names]) -> dict[Scope, Scope | str]:
    """``_place_folders`` for conversations' folders: each to a conversation of a bot of the owner's (the
    same conversation: its key keeps the hash of the platform's id), or why not. Fills ``names`` with what
    the owner's bots of the folders are called now."""
    from bridges.models import Binding, Platform

    bots = {str(pk): (platform, name) for pk, platform, name in
            Binding.objects.filter(owner_id=owner_id).values_list("pk", "platform", "name")}
    live = {str(pk) for pk in Binding.objects.filter(
        pk__in=[int(s.key.split("-", 1)[0]) for s in scopes]).values_list("pk", flat=True)}
    labels = dict(Platform.choices)
    # the owner's conversations whose notes they deleted (in their Trash): theirs, whatever the export says
    trashed = {path.split("/")[2] for path in TrashFile.objects.filter(
        entry__owner_id=owner_id, entry__restored_at__isnull=True, path__startswith=f"{ROOT}/channels/")
        .values_list("path", flat=True)}
    places: dict[Scope, Scope | str] = {}
    for scope in scopes:
        bot, digest = scope.key.split("-", 1)
        holder = holders.get(scope)
        kept = scope.key in held and bot not in live  # a conversation of a bot the owner removed
        # ... whose notes they deleted since: its bot was theirs (their own export says so, or their Trash)
        removed = bot not in bots and (ours or scope.key in trashed and bot not in live)
        if bot in bots:
            names[scope] = _Names(bots[bot][1])
        elif kept:  # its notes stay where they were (``bridges.services.binding_delete``); no chat reads them
            names[scope] = _Names(holder.name, deleted=True, platform=holder.platform) if holder else _Names(
                "", deleted=True)
        if holder is None:
            places[scope] = scope if bot in bots or kept else _removed_bot(
                bot, None, trashed=scope.key in trashed) if removed else (
                f"the bot of this conversation ({bot}) is not one of your bots, and the export does not say "
                "which bot it was.")
            continue
        if ours and bot in bots:
            places[scope] = scope  # the very bot, by the id it keeps through a rename
            continue
        same = sorted((key for key, found in bots.items() if found == (holder.platform, holder.name)), key=int)
        what = f"{labels.get(holder.platform, holder.platform)} bot “{holder.name}”"
        if bot in same:
            places[scope] = scope
        elif len(same) == 1:
            places[scope] = Scope("channel", f"{same[0]}-{digest}")
        elif same:
            places[scope] = (f"{len(same)} of your bots are the {what}, so the import cannot tell which one this "
                             "conversation is of. Rename all but one of them, then import the zip again.")
        elif kept:
            places[scope] = scope
        elif removed:
            places[scope] = _removed_bot(bot, what, trashed=scope.key in trashed)
        else:
            places[scope] = (f"none of your bots is the {what}, whose conversation these notes are of. Connect it, "
                             "then import the zip again."
                             + (_not_this_account("bot", bots[bot][1], holder) if bot in bots else ""))
    return places


def _removed_bot(bot: str, what: str | None, *, trashed: bool) -> str:
    """Why a conversation's folder of the owner's is not imported: they removed its bot (``what``: "Telegram bot
    “Home”", None when the export does not name it), and its notes, which stay when a bot is removed, were
    deleted since (``trashed``: they are in the owner's Trash). An import does not undo that delete on its own,
    nor makes notes no chat reads; what to do instead is said."""
    ways = [way for way, there in (("restore them from Files → Trash", trashed),
                                   ("connect the bot again and import the zip again", what is not None)) if there]
    return (f"you removed {f'the {what}' if what else f'the bot of this conversation ({bot})'} from your account, "
            "and its notes were deleted since, so no chat of yours would read them."
            + (f" To have them back, {', or '.join(ways)}." if ways else ""))


def _skip(scope: Scope, reason: str) -> dict[str, str]:
    return {"path": f"{scope.root}/", "reason": f"Not imported: {reason}"}


def _give_importances(owner_id: int, weights: dict[tuple[Scope, str], float], topics: set[tuple[Scope, str]],
                      kept: set[tuple[Scope, str]], result: ImportResult, actor: str) -> None:
    """Give the notes ``topics`` that an import brought in the importance the export recorded, as part of the
    import's change set (one of their own when the import wrote no file), so that its Undo takes them back
    too. A note the account ``kept`` as it was keeps the importance its owner gave it, if any; a note the
    import brought in takes the export's over one left from an older note of its topic."""
    have = notes_selectors.note_importances(owner_id=owner_id)
    change = ChangeSet.objects.get(pk=result.change_id) if result.change_id else None
    for scope, topic in sorted(topics, key=lambda note: (note[0].root, note[1])):
        value = weights.get((scope, topic))
        if (scope, topic) in kept and ((scope.kind, scope.key, topic) in have or value is None):
            continue  # a note that was there keeps what its owner gave it
        if value is None and (scope.kind, scope.key, topic) not in have:
            continue
        # the export's weight; or, where it gives none, not one left from an older note of the topic
        _, made = importance_change(owner_id=owner_id, scope=scope, topic=topic, importance=value,
                                    change=change, source=ChangeSet.Source.IMPORT, actor=actor)
        change = change or made
        result.importances += value is not None
    if change is not None and result.change_id is None:
        result.change_id = change.pk


def _scope_of(path: str) -> Scope:
    return parse_path(path).scope


# --------------------------------------------------------------------------------------------------------
# Importing a zip
# --------------------------------------------------------------------------------------------------------


def check_memory_on(decision: policy.TurnDecision) -> None:
    """An import writes notes, so it is refused while memory is off (403 with the policy's code: the user's
    switch or the provider Off, the server's files, an add-on that is gone), as a list of facts is. A zip is
    not held to the save level: Never stops the assistant from saving, and an export written back is the
    person's own notes (what differs still waits for their answer)."""
    if not decision.memory_on:
        code = decision.code or "user_off"
        raise Forbidden(decision.save_message or policy.MESSAGES[code], code=code)


@transaction.atomic
def import_zip(*, owner_id: int, data: bytes, actor: str = "you") -> ImportResult:
    """Import an export zip (see the module docstring). Raises InvalidInput (400) for a bad zip or index,
    TooLarge (413), Forbidden (403, ``check_memory_on``) while memory is off, CapExceeded (422, with the
    current entries) when an index would pass its cap."""
    files = read_export_zip(data)
    weights = read_export_importances(data)
    folders = read_export_folders(data)
    for path, text in files.items():
        if parse_path(path).is_index:
            try:
                parse_index(text)
                check_own_files(text)  # as the Files page refuses it: a note without its details
            except InvalidInput as exc:
                named = exc.details if isinstance(exc.details, dict) else {}
                raise _bad(f"{path}: {exc.message}", **{**named, "path": path}) from None
    check_memory_on(owner_context(owner_id=owner_id).decision)
    lock_owner(owner_id)
    placement = _place_folders(owner_id=owner_id, scopes={_scope_of(path) for path in files}, folders=folders)
    files = {placed: text for path, text in files.items() if (placed := placement.path(path)) is not None}
    weights = {(placement.to[scope], topic): value for (scope, topic), value in weights.items()
               if scope in placement.to}
    if not NoteFile.objects.filter(owner_id=owner_id, path__startswith=ROOT + "/").exists():
        result = ImportResult(kind="zip", mode="restored", written=sorted(files))
        if files:
            change = apply_changes(owner_id=owner_id, writes=dict(files), source=ChangeSet.Source.IMPORT,
                                   summary=f"Imported {len(files)} files", actor=actor)
            result.change_id = change.pk
        imported: set[tuple[Scope, str]] = set()
        for path, text in files.items():
            parsed = parse_path(path)
            if parsed.is_index:
                imported |= {(parsed.scope, entry.topic) for entry in parse_index(text)}
        kept: set[tuple[Scope, str]] = set()
    else:
        result = _merge(owner_id=owner_id, files=files, weights=weights, actor=actor)

        def notes(named: list[str]) -> set[tuple[Scope, str]]:
            return {(parse_path(f"{note}.md").scope, note.rsplit("/", 1)[1]) for note in named
                    if not note.endswith(".md")}

        kept = notes(result.unchanged)
        imported = notes(result.added) | kept
    result.skipped = [*placement.skipped, *result.skipped]
    result.moved, result.renamed, result.deleted_agents = placement.moved, placement.renamed, placement.deleted_agents
    result.removed_bots = placement.removed_bots
    _give_importances(owner_id, weights, imported, kept, result, actor)
    return result


#: Why a file of the zip that the owner deleted (it is in their Trash) is not written back.
TRASHED_FILE = ("Not imported: you deleted this file, and it is in your Trash. Restore it from Files → Trash if "
                "you want it back.")


def _merge(*, owner_id: int, files: dict[str, str], weights: dict[tuple[Scope, str], float], actor: str
           ) -> ImportResult:
    """Merge ``files`` into the owner's notes topic by topic (see the module docstring); a note that waits as a
    suggestion carries the importance the export gave it (``weights``), which it takes when confirmed."""
    result = ImportResult(kind="zip", mode="merged")
    existing = {f.path: f.content for f in NoteFile.objects.filter(owner_id=owner_id, path__in=list(files))}
    # deleted by the owner (in the Trash): not brought back without their answer
    trashed_lines, trashed_files = notes_selectors.trashed(owner_id=owner_id, paths=files)
    writes: dict[str, str] = {}
    differences: list[tuple[Scope, IndexEntry | None, IndexEntry, str | None]] = []  # mine None: deleted
    scopes = sorted({_scope_of(path) for path in files}, key=lambda s: s.root)
    referenced: set[str] = set()
    for scope in scopes:
        incoming = parse_index(files[scope.index_path]) if scope.index_path in files else []
        current = notes_selectors.index_entries(owner_id=owner_id, scope=scope)
        by_topic = {entry.topic: entry for entry in current}
        added: list[IndexEntry] = []
        for entry in incoming:
            topic_path = scope.topic_path(entry.topic)
            referenced.add(topic_path)
            details = files.get(topic_path)
            mine = by_topic.get(entry.topic)
            if mine is None:
                if topic_path in existing and details is not None and existing[topic_path] != details:
                    result.skipped.append({"path": topic_path, "reason": "a different file of that name exists"})
                    continue
                if (scope.index_path, entry.topic) in trashed_lines:
                    differences.append((scope, None, entry, details))
                    continue
                added.append(entry)
                if details is not None:
                    writes[topic_path] = details
                result.added.append(f"{scope.root}/{entry.topic}")
                continue
            my_details = notes_selectors.topic_text(owner_id=owner_id, scope=scope, topic=entry.topic)
            if mine.summary == entry.summary and (details is None or details == my_details):
                result.unchanged.append(f"{scope.root}/{entry.topic}")
                continue
            differences.append((scope, mine, entry, details))
        if added:
            grown = [*current, *added]
            lines, size = index_size(render_index(grown))
            if index_over_caps(lines, size):
                raise cap_error(scope.index_path, grown, lines, size, current=current)
            writes[scope.index_path] = render_index(grown)
    for path, text in files.items():
        parsed = parse_path(path)
        if parsed.is_index or path in referenced:
            continue
        if path not in existing and path in trashed_files:
            result.skipped.append({"path": path, "reason": TRASHED_FILE})
        elif path not in existing:
            writes[path] = text  # a topic file no index line names: kept as it was
            result.added.append(path)
        elif existing[path] != text:
            result.skipped.append({"path": path, "reason": "a different file of that name exists"})
        else:
            result.unchanged.append(path)
    if writes:
        change = apply_changes(owner_id=owner_id, writes=writes, source=ChangeSet.Source.IMPORT,
                        summary=f"Imported {len(result.added)} notes", actor=actor)
        result.change_id, result.written = change.pk, sorted(writes)
    for scope, mine, entry, details in differences:
        try:
            proposal = proposal_create(
                owner_id=owner_id, scope=scope, topic=entry.topic, summary=entry.summary, details=details,
                reason="import_differs" if mine is not None else "import_deleted", origin="web",
                source=Proposal.Source.IMPORT, importance=weights.get((scope, entry.topic)),
                correction=mine is not None
                and note_author(owner_id=owner_id, scope=scope, topic=entry.topic) != "model",
            )
        except AlreadySaved:
            result.unchanged.append(f"{scope.root}/{entry.topic}")
            continue
        except InvalidInput as exc:  # e.g. a line the Files page let grow past what a proposed summary may be
            where = {"path": scope.index_path, "topic": entry.topic,
                     "file": scope.topic_path(entry.file) if entry.file else None}
            raise InvalidInput(f"{scope.index_path}, the note {entry.topic!r}: {exc.message}", code=exc.code,
                               details=where) from None
        if getattr(proposal, "duplicate", False):  # the same archive imported again: it waits already
            result.waiting.append(proposal.pk)
        else:
            result.proposals.append(proposal.pk)
    return result


# --------------------------------------------------------------------------------------------------------
# Importing a list of facts
# --------------------------------------------------------------------------------------------------------


def is_zip(data: bytes) -> bool:
    """Whether an upload is a zip (an export): a local file header, or the end record alone of an empty one
    (the export of an account without notes)."""
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06")


#: What an import says of a JSON document sent as a list of facts.
NOT_FACTS_BUT_JSON = ("This is a JSON document, not a list of facts. A list of facts is plain text, one fact a "
                      "line (bullets and numbering are fine): copy the facts out of the other assistant as text. "
                      "An export of these notes is the zip that Export makes.")


def _is_json(text: str) -> bool:
    """Whether ``text`` is a JSON object or array, or JSON Lines of them (what other tools export)."""
    body = text.strip()
    if body[:1] not in ("{", "["):
        return False
    return _json_container(body) or all(_json_container(line) for line in body.splitlines() if line.strip())


def _json_container(text: str) -> bool:
    try:
        return isinstance(json_loads(text), (dict, list))
    except ValueError:
        return False


def parse_facts(text: str) -> list[str]:
    """One fact a line: bullets, numbering and check boxes dropped, blank lines and headings skipped; a byte
    order mark at the start (an editor's way of saying UTF-8) is no part of the first fact."""
    if not isinstance(text, str):
        raise InvalidInput("facts must be text, one fact a line", code="invalid_facts")
    text = text.removeprefix("\ufeff")
    if len(text) > FACTS_MAX_CHARS:
        raise TooLarge(f"The list is longer than {FACTS_MAX_CHARS} characters.", code="import_too_large")
    if "\x00" in text:
        raise InvalidInput("facts may not contain NUL characters", code="invalid_facts")
    if _is_json(text):  # another tool's export: its raw JSON would become one fact, or one a line
        raise InvalidInput(NOT_FACTS_BUT_JSON, code="invalid_facts")
    facts: list[str] = []
    seen: set[str] = set()
    for raw in text.splitlines():
        line = _BULLET.sub("", raw).strip()
        if not line or line.startswith("#"):
            continue
        fact = " ".join(line.split())
        if fact.lower() in seen:
            continue
        seen.add(fact.lower())
        facts.append(fact)
    if not facts:
        raise InvalidInput("The list holds no facts (one fact a line).", code="invalid_facts")
    if len(facts) > MAX_FACTS:
        raise TooLarge(f"The list holds more than {MAX_FACTS} facts.", code="import_too_large")
    return facts


@transaction.atomic
def import_facts(*, owner_id: int, text: str, actor: str = "you") -> ImportResult:
    """Import a list of facts into the user's own notes, per the policy (see the module docstring).

    Raises Forbidden (403, the policy's code) when the policy lets nothing be proposed (memory off, saving
    Never), CapExceeded (422, with the current entries) when the new lines would pass the index caps.
    """
    facts = parse_facts(text)
    context = owner_context(owner_id=owner_id)
    if "propose_change" not in context.decision.tools:
        code = context.decision.save_code or "saving_off"
        raise Forbidden(context.decision.save_message or "Saving notes is off.", code=code)
    if context.decision.served_by != "builtin":
        raise Forbidden("Your memory is served by an add-on you picked; import the facts there.",
                        code="served_by_addon")
    scope = Scope.user()
    lock_owner(owner_id)
    current = notes_selectors.index_entries(owner_id=owner_id, scope=scope)
    epoch = timezone.now()
    known = [RankCandidate(id=e.topic, text=e.summary, updated_at=epoch) for e in current]
    # a fact that a suggestion still waiting for an answer holds (the same list imported again) is not asked twice
    waiting = list(proposal_list(owner_id=owner_id, status="pending")
                   .filter(scope_kind=scope.kind, scope_key=scope.key, provider="", is_delete=False)
                   .values_list("pk", "summary"))
    known += [RankCandidate(id=("waiting", pk), text=summary, updated_at=epoch) for pk, summary in waiting]
    topics = topics_in_use(owner_id=owner_id, scope=scope, entries=current)  # waiting proposals' and stray files'
    result = ImportResult(kind="facts", mode="facts")
    saves: list[tuple[IndexEntry, str | None]] = []
    asks: list[tuple[IndexEntry, str | None, policy.NoteDecision]] = []
    for fact in facts:
        match = is_duplicate(fact, known)
        if match is not None and isinstance(match.id, tuple):
            result.waiting.append(match.id[1])
            continue
        if match is not None:
            result.unchanged.append(fact)
            continue
        summary = one_line(fact, SUMMARY_MAX_CHARS)
        details = fact + "\n" if summary != fact else None
        topic = _free_topic(slugify(None, fact) or "note", topics)  # "note", as /remember and chat suggestions
        topics.add(topic)
        known.append(RankCandidate(id=topic, text=fact, updated_at=epoch))
        decision = policy.decide_note(context.facts, policy.NoteFacts.of(
            fact, scope=None, saved_in_this_reply=len(saves)))
        if decision.outcome == "refuse":
            raise Forbidden(decision.message, code=decision.reason)
        entry = IndexEntry(topic, summary, topic if details else None)
        if decision.outcome == "save_now":
            saves.append((entry, details))
        else:
            asks.append((entry, details, decision))
    grown = [*current, *(entry for entry, _ in saves), *(entry for entry, _, _ in asks)]
    lines, size = index_size(render_index(grown))
    if index_over_caps(lines, size):
        raise cap_error(scope.index_path, grown, lines, size, current=current)
    if saves:
        writes: dict[str, str | None] = {scope.index_path: render_index([*current, *(e for e, _ in saves)])}
        for entry, details in saves:
            if details:
                writes[scope.topic_path(entry.topic)] = details
        change = apply_changes(owner_id=owner_id, writes=writes, source=ChangeSet.Source.IMPORT,
                        summary=f"Imported {len(saves)} facts", actor=actor)
        result.change_id = change.pk
        result.written = sorted(p for p in writes)
        result.added = [f"{scope.root}/{entry.topic}" for entry, _ in saves]
    for entry, details, decision in asks:
        try:
            proposal = proposal_create(
                owner_id=owner_id, scope=scope, topic=entry.topic, summary=entry.summary, details=details,
                reason=decision.reason, locked=decision.outcome == "locked", requester_only=decision.requester_only,
                origin="web", source=Proposal.Source.IMPORT,
            )
        except AlreadySaved:
            result.unchanged.append(entry.summary)
            continue
        except ApplicationError:
            raise
        result.proposals.append(proposal.pk)
    return result


def _free_topic(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    for number in range(2, 1000):
        suffix = f"-{number}"
        candidate = base[: 40 - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
    raise InvalidInput("too many facts share a topic name", code="invalid_facts")
