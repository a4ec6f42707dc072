"""``python manage.py memory <command> --user NAME``: manage one user's memory from a terminal.

The same store as the web app: every write goes through ``notes.services``, ``memory.proposals`` or the
growth services, and whatever those (or the policy) refuse is refused here with a clear message (a
``CommandError``, exit status 1). Output is a table, or JSON with ``--json``.

Commands: list, show, add, edit, forget, trash, restore, proposals, accept, reject, export, import, clear,
stats, consolidate.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import unicodedata
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from localai_memory.core.errors import ApplicationError, Conflict, InvalidInput
from localai_memory.growth import importing
from localai_memory.growth.consolidation import consolidate_user
from localai_memory.growth.import_answer import facts_text, import_answer, import_upload
from localai_memory.growth.selectors import (
    last_pass,
    line_writers,
    memory_stats,
    owner_context,
    owner_scopes,
    pass_sentence,
)
from localai_memory.growth.services import memory_clear, memory_leftovers
from localai_memory.memory import proposals
from localai_memory.memory.policy import MESSAGES
from localai_memory.memory.proposals_api import proposal_json
from localai_memory.memory.providers import forget_summary
from localai_memory.memory.selectors import owned_scope
from localai_memory.memory.services import addons_forget_all
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet
from localai_memory.notes.paths import Scope
from localai_memory.recall.service import activity_json, notes_activity

ACTOR = "you (terminal)"
#: Who changed a note last, in the table of ``list`` ("?": its history is too old to tell).
WRITERS = {"user": "you", "model": "assistant", "import": "import"}
#: ``--version`` of ``edit`` and ``forget``.
VERSION_HELP = ("The note's version as `list` or `show` printed it: a note changed since (by the web app, a chat "
                "or another terminal) is left as it is, and the command says how it reads now.")
COMMANDS = ("list", "show", "add", "edit", "forget", "trash", "restore", "proposals", "accept", "reject",
            "export", "import", "clear", "stats", "consolidate")


def parse_scope(raw: str | None) -> Scope:
    """``user`` (default), ``agent:<id>`` or ``channel:<binding>-<hash>``."""
    if raw in (None, "", "user", "yours"):
        return Scope.user()
    kind, _, key = str(raw).partition(":")
    if kind not in ("agent", "channel") or not key:
        raise CommandError(f"--scope must be user, agent:<id> or channel:<key>, not {raw!r}")
    try:
        return Scope(kind, key)  # type: ignore[arg-type]
    except InvalidInput as exc:
        raise CommandError(f"--scope {raw!r}: {exc.message}") from None


def importance_arg(raw: str) -> float | str:
    """``--importance``: a number from 0 to 1, or ``default``."""
    if raw.strip().lower() == "default":
        return "default"
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("importance is a number from 0 to 1, or 'default'") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("importance is a number from 0 to 1, or 'default'")
    return value


def version_arg(raw: str) -> str:
    """``--version``: a note's version as ``list`` and ``show`` print it (16 hex digits), read as the API and
    MCP read one (``notes.services.note_version_given``), refused here only to say so in the terminal's words."""
    version = notes_services.note_version_given(raw)
    if not isinstance(version, str) or not notes_services.NOTE_VERSION_RE.fullmatch(version):
        raise argparse.ArgumentTypeError("version is the note's version as `list` or `show` prints it "
                                         "(16 hex digits)")
    return version


def shown(text: str) -> str:
    """``text`` as the terminal prints it: every control character but a newline or tab, and every format
    character (a bidi override, a zero-width space), as a ``\\uXXXX`` escape, so a note written through the
    Files page (which keeps text as typed) cannot move the cursor, recolour the screen, ring the bell or turn
    a line around. The escape is JSON's too, so ``--json`` output stays valid JSON."""

    def escaped(char: str) -> str:
        if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return char
        code = ord(char)
        if code > 0xFFFF:  # as a UTF-16 surrogate pair, as JSON writes it
            code -= 0x10000
            return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
        return f"\\u{code:04x}"

    return "".join(map(escaped, text))


def refusal(exc: ApplicationError) -> CommandError:
    """An application error as the terminal says it: the message, plus the current entries of a full index."""
    lines = [exc.message]
    details = exc.details if isinstance(exc.details, dict) else {}
    entries = details.get("entries")
    if isinstance(entries, list) and entries:
        lines.append("Current entries:")
        lines += [f"  - {e.get('topic')}: {e.get('summary')}" for e in entries if isinstance(e, dict)]
    return CommandError(shown("\n".join(lines)))


def columns(text: str) -> int:
    """How many columns a terminal gives ``text``: two for a wide or full-width character (Chinese, Japanese,
    Korean, most emoji), none for a combining mark or a variation selector, one for the rest."""
    return sum(0 if unicodedata.category(char) in ("Mn", "Me") else
               2 if unicodedata.east_asian_width(char) in ("W", "F") else 1 for char in text)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Columns aligned as a terminal shows them (``columns``, not characters), each at most 60 wide; a longer
    cell is cut with "…". Cells are ``shown`` first, so what is measured is what is printed."""
    cells = [[shown(" ".join(str(h).split())) for h in headers]]
    cells += [[shown(" ".join(("" if v is None else str(v)).split())) for v in row] for row in rows]
    widths = [min(max(columns(row[i]) for row in cells), 60) for i in range(len(headers))]

    def fit(text: str, width: int) -> str:
        if columns(text) > width:
            kept, used = [], 0
            for char in text:
                if used + columns(char) > width - 1:
                    break
                kept.append(char)
                used += columns(char)
            text = "".join(kept) + "…"
        return text + " " * (width - columns(text))

    out = ["  ".join(fit(v, widths[i]) for i, v in enumerate(row)).rstrip() for row in cells]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _memory_words(memory: dict[str, Any]) -> str:
    """Whether memory serves, for the first line of ``stats``: "memory on" only when a chat would read and
    save notes; switched on but stopped (the server's files off, an add-on that does not run), it says why."""
    if not memory["enabled"]:
        return "memory off"
    unavailable = memory.get("unavailable") or {}
    if unavailable.get("code") == "server_files_off":
        return "memory off: files are off on this server (LOCALAI_MEMORY_FILES), and notes are files"
    if unavailable:
        return f"memory off: {unavailable['message']}"
    return "memory on"


class Command(BaseCommand):
    help = "Manage a user's memory: list, show, add, edit, forget, trash, restore, proposals, accept, reject, " \
           "export, import, clear, stats, consolidate (each with --user NAME; --json for JSON)."
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        common = CommandParser(add_help=False)
        common.add_argument("--user", required=True, help="The username whose memory to manage.")
        common.add_argument("--json", action="store_true", dest="as_json", help="Print JSON instead of a table.")
        scoped = CommandParser(add_help=False)
        scoped.add_argument("--scope", default=None,
                            help="user (default), agent:<id> or channel:<binding>-<hash>")
        sub = parser.add_subparsers(dest="command", required=True, metavar="command")

        def add(name: str, help_text: str, *parents: CommandParser) -> CommandParser:
            return sub.add_parser(name, help=help_text, parents=[common, *parents],
                                  called_from_command_line=getattr(parser, "called_from_command_line", None))

        p = add("list", "The notes of every scope (or one with --scope).")
        p.add_argument("--scope", default=None)
        p = add("show", "One topic in full: its index line, its file and its last change.", scoped)
        p.add_argument("topic")
        p = add("add", "Save a note yourself (a new topic): add TOPIC SUMMARY, or add SUMMARY alone and the topic "
                       "is made from its first words.", scoped)
        p.add_argument("topic", nargs="?", default=None,
                       help="Lower-case letters, digits and dashes; left out, it is made from the summary's words.")
        p.add_argument("summary", help="The one-line index entry.")
        p.add_argument("--details", default=None, help="The topic file's text.")
        p.add_argument("--importance", type=importance_arg, default=None,
                       help="0 to 1: how much recall weighs the note among others about as relevant "
                            "(default: 0.8 for your own notes).")
        p = add("edit", "Change a note's summary, details and/or importance.", scoped)
        p.add_argument("topic")
        p.add_argument("--summary", default=None)
        p.add_argument("--details", default=None)
        p.add_argument("--importance", type=importance_arg, default=None,
                       help="0 to 1, or 'default' to give it back the one its writer gives.")
        p.add_argument("--version", type=version_arg, default=None, dest="note_version", help=VERSION_HELP)
        p = add("forget", "Remove one topic (it goes to the Trash; `restore` brings it back).", scoped)
        p.add_argument("topic")
        p.add_argument("-y", "--yes", action="store_true")
        p.add_argument("--version", type=version_arg, default=None, dest="note_version", help=VERSION_HELP)
        add("trash", "What is in the Trash.")
        p = add("restore", "Put a Trash entry back.")
        p.add_argument("entry_id", type=int)
        p = add("proposals", "Suggestions that wait for your answer (--all: decided ones too).")
        p.add_argument("--all", action="store_true", dest="all_proposals")
        p = add("accept", "Accept a suggestion (saves it as one change set).")
        p.add_argument("proposal_id", type=int)
        p = add("reject", "Answer no to a suggestion: it is dropped (a note to forget is kept), and not suggested "
                          "again.")
        p.add_argument("proposal_id", type=int)
        p = add("export", "Write a zip of the Memory files.")
        p.add_argument("--output", "-o", default=None, help="The zip to write (default memory-<user>.zip; - for "
                                                            "stdout).")
        p = add("import", "Import an export zip, or a text file with one fact a line.")
        p.add_argument("path", help="A .zip export or a text file (- for stdin).")
        p.add_argument("--facts", action="store_true", help="Read the file as a list of facts, one a line.")
        p = add("clear", "Erase every note for good: files, versions, changes, Trash, proposals.")
        p.add_argument("-y", "--yes", action="store_true")
        add("stats", "Lines and bytes against the caps, topics, proposals, last change.")
        add("consolidate", "Suggest notes from recent chats now (Synthesize now).")

    # ----------------------------------------------------------------------------------------------------

    def execute(self, *args: Any, **options: Any) -> Any:
        """The command, with the app's INFO log lines (the embedder loaded, a copy of it derived) kept off the
        terminal unless ``-v 2`` asks for them: its answer is what it prints. Warnings still show."""
        app_logger = logging.getLogger("localai_memory")
        level = app_logger.level
        if options.get("verbosity", 1) < 2:
            app_logger.setLevel(max(logging.WARNING, level))
        try:
            return super().execute(*args, **options)
        finally:
            app_logger.setLevel(level)

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["user"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"There is no user named {username!r}.")
        self.user = user
        self.as_json = bool(options.get("as_json"))
        command = options["command"]
        try:
            getattr(self, f"do_{command}")(**options)
        except ApplicationError as exc:
            raise refusal(exc) from None

    def emit(self, data: Any, text: str) -> None:
        self.stdout.write(shown(json.dumps(data, indent=2, ensure_ascii=False, default=str) if self.as_json
                                else text))

    def _writes_allowed(self) -> None:
        """Notes are files: while the server has files off, nothing can be written (the policy's reading; the
        note store refuses it too, ``notes.services.apply_changes``), though notes can still be forgotten."""
        decision = owner_context(owner_id=self.user.pk).decision
        if decision.blocked_by == "server":
            raise CommandError(MESSAGES["server_files_off"])

    # --- reading ------------------------------------------------------------------------------------------

    def do_list(self, *, scope: str | None = None, **_: Any) -> None:
        scopes = [parse_scope(scope)] if scope not in (None, "all") else owner_scopes(owner_id=self.user.pk)
        rows: list[dict[str, Any]] = []
        activity = notes_activity(owner_id=self.user.pk)
        for item in scopes:
            entries = notes_selectors.index_entries(owner_id=self.user.pk, scope=item)
            versions = notes_selectors.note_versions(owner_id=self.user.pk, scope=item, entries=entries)
            for entry in entries:
                rows.append({"scope": item.name, **entry.as_dict(),
                             **activity_json(activity.get((item.kind, item.key, entry.topic))),
                             "note_version": versions[entry.topic]})
        if not rows and not self.as_json:
            self.stdout.write("No notes.")
            return
        self.emit({"notes": rows}, table(
            ["scope", "topic", "summary", "file", "changed by", "when (UTC)", "version"],
            [[r["scope"], r["topic"], r["summary"], r["file"] or "", WRITERS.get(r["written_by"] or "", "?"),
              (r["written_at"] or "")[:16].replace("T", " "), r["note_version"]] for r in rows]))

    def do_show(self, *, topic: str, scope: str | None = None, **_: Any) -> None:
        item = parse_scope(scope)
        entry = next((e for e in notes_selectors.index_entries(owner_id=self.user.pk, scope=item)
                      if e.topic == topic), None)
        details = notes_selectors.topic_text(owner_id=self.user.pk, scope=item, topic=topic)
        if entry is None and details is None:
            raise CommandError(f"There is no note {topic!r} in {self._label(item)}.")
        # The last change of its line, its topic file (not of other lines of the index) or its importance.
        written = line_writers(owner_id=self.user.pk, scope=item, topics=[topic]).get(topic)
        weighed = ChangeSet.objects.filter(owner_id=self.user.pk, importance__contains=[
            {"scope": item.name, "topic": topic}]).order_by("-created_at", "-id").first()
        changes = [c for c in (weighed, ChangeSet.objects.filter(pk=written.change_id).first() if written else None)
                   if c is not None]
        last = max(changes, key=lambda c: (c.created_at, c.pk), default=None)
        given = notes_selectors.note_importances(owner_id=self.user.pk).get((item.kind, item.key, topic))
        version = notes_selectors.note_version(line=entry, details=details, importance=given)
        data = {"scope": item.name, "topic": topic, "summary": entry.summary if entry else None,
                "details": details, "path": item.topic_path(topic), "importance": given, "note_version": version,
                "last_change": None if last is None else {"id": last.pk, "at": last.created_at.isoformat(),
                                                          "source": last.source, "summary": last.summary}}
        text = [f"{topic} ({item.name})", f"summary: {data['summary'] or '(no index line)'}"]
        if given is not None:
            text.append(f"importance: {given:g} (you set it)")
        if details:
            text += ["details:", details.rstrip("\n")]
        if last is not None:
            text.append(f"last change: #{last.pk} {last.created_at:%Y-%m-%d %H:%M} {last.source}: {last.summary}")
        if version is not None:
            text.append(f"version: {version} (edit and forget take it as --version)")
        self.emit(data, "\n".join(text))

    def do_trash(self, **_: Any) -> None:
        entries = list(notes_selectors.trash_list(owner_id=self.user.pk))
        data: list[dict[str, Any]] = [{"id": e.pk, "label": e.label, "kind": e.kind,
                                       "created_at": e.created_at.isoformat(),
                                       "files": [f.path for f in e.files.all()]} for e in entries]
        if not data and not self.as_json:
            self.stdout.write("The Trash is empty.")
            return
        self.emit({"trash": data}, table(["id", "moved", "what", "files"],
                                         [[d["id"], d["created_at"][:16].replace("T", " "), d["label"],
                                           len(d["files"])] for d in data]))

    def do_proposals(self, *, all_proposals: bool = False, **_: Any) -> None:
        # every one, however many: the API pages them (``limit``, ``before``), a terminal lists them all
        rows = list(proposals.proposal_list(owner_id=self.user.pk, status="all" if all_proposals else "pending"))
        data = [proposal_json(p) for p in rows]
        if not data and not self.as_json:
            self.stdout.write("No suggestions wait for you.")
            return

        def change(item: dict[str, Any]) -> str:
            new = "(forget)" if item["delete"] else item["summary"]
            if item["makes_room_for"]:
                new = f"(forget, to make room for {item['makes_room_for']['topic']})"
            old = item["current"]["summary"]
            return f"{old} → {new}" if old else new

        self.emit({"proposals": data}, table(
            ["id", "status", "scope", "topic", "change", "from", "correction"],
            [[d["id"], d["status"], Scope(d["scope"]["kind"], d["scope"]["key"]).name
              + (f" in the add-on {d['provider']}" if d["provider"] else ""), d["topic"], change(d),
              d["source"], "yes" if p.correction else ""] for d, p in zip(data, rows, strict=True)]))

    def do_stats(self, **_: Any) -> None:
        stats = memory_stats(owner_id=self.user.pk)
        rows = [[Scope(s["kind"], s["key"]).name + (" (deleted agent)" if s["deleted_agent"] else ""),
                 f"{s['lines']}/{s['max_lines']}", f"{s['bytes']}/{s['max_bytes']}", len(s["topics"]), s["files"],
                 s["pending_proposals"], (s["last_change"] or {}).get("at", "")[:16].replace("T", " ")]
                for s in stats["scopes"]]
        totals = stats["totals"]
        memory = stats["memory"]
        text = "\n".join([
            (f"{_memory_words(memory)}, saving: {memory['save_mode']}, "
             f"suggestions from chats: {'on' if memory['consolidation_enabled'] else 'off'}"),
            table(["scope", "lines", "bytes", "topics", "files", "waiting", "last change"], rows),
            (f"total: {totals['topics']} topics, {totals['files']} files, {totals['pending_proposals']} waiting, "
             + (f"{totals['addon_pending_proposals']} waiting for the memory add-on, "
                if totals["addon_pending_proposals"] else "")
             + f"{totals['trash_entries']} in the Trash"),
        ])
        run = last_pass(owner_id=self.user.pk)
        if run is not None:
            text += (f"\nlast look through the chats ({run.get_trigger_display().lower()}, "
                     f"{run.started_at:%Y-%m-%d %H:%M} UTC): {pass_sentence(run)}")
        self.emit(stats, text)

    # --- writing ------------------------------------------------------------------------------------------

    def do_add(self, *, topic: str | None, summary: str, details: str | None = None, scope: str | None = None,
               importance: float | str | None = None, **_: Any) -> None:
        self._writes_allowed()
        item = self._own_scope(scope, writes_topic=topic or "")
        if importance == "default":
            raise CommandError("A new note has its default importance already; give a number from 0 to 1.")
        weight = importance if isinstance(importance, float) else notes_services.KEEP
        with transaction.atomic():  # its version read under the owner's lock, as edit reads it
            change, topic = self._add_note(item, topic, summary, details, weight)
            version = notes_selectors.note_version_now(owner_id=self.user.pk, scope=item, topic=topic)
        self.emit({"saved": topic, "scope": item.name, "change_id": change.pk, "note_version": version,
                   "importance": importance if isinstance(importance, float) else None},
                  f"Saved {topic} in {self._label(item)} (change #{change.pk}; version {version}).")

    def _add_note(self, item: Scope, topic: str | None, summary: str, details: str | None,
                  weight: object) -> tuple[ChangeSet, str]:
        """A new note (its topic made from its words when ``topic`` is None): its change set and topic."""
        from localai_memory.chats.remember import note_add

        if topic is None:
            change, topic = note_add(owner_id=self.user.pk, scope=item, summary=summary, details=details,
                                     importance=weight, source=ChangeSet.Source.CLI, actor=ACTOR)
            if change is None:
                raise CommandError(f"That is already in {self._label(item)}, as the note {topic!r}.")
            return change, topic
        try:  # refused under the owner's lock if the topic exists, so two adds at once never overwrite
            saved = notes_services.note_save(owner_id=self.user.pk, scope=item, topic=topic, summary=summary,
                                             details=details, importance=weight,
                                             source=ChangeSet.Source.CLI, actor=ACTOR, create_only=True)
        except Conflict as exc:
            if exc.code != "topic_exists":
                raise
            raise CommandError(f"{topic!r} exists already in {self._label(item)}; use edit to change it.") from None
        assert saved is not None  # a new note's text is always a change
        return saved, topic

    def do_edit(self, *, topic: str, summary: str | None = None, details: str | None = None,
                scope: str | None = None, importance: float | str | None = None, note_version: str | None = None,
                **_: Any) -> None:
        self._writes_allowed()
        item = self._own_scope(scope, writes_topic=topic)
        if summary is None and details is None and importance is None:
            raise CommandError("Give --summary, --details, --importance or several.")
        entry = next((e for e in notes_selectors.index_entries(owner_id=self.user.pk, scope=item)
                      if e.topic == topic), None)
        if entry is None:
            raise CommandError(f"There is no note {topic!r} in {self._label(item)}; use add to make it.")
        text_given = summary is not None or details is not None
        # The version read in the write's transaction, under the owner's lock: the note as this edit left it,
        # never with another writer's change that came after (a next --version would pass over it unseen).
        with transaction.atomic():
            change = notes_services.note_save(  # no --summary: the one the index has under the owner's lock
                owner_id=self.user.pk, scope=item, topic=topic,
                summary=(summary if summary is not None else notes_services.KEEP) if text_given else None,
                details=details,
                importance=(notes_services.KEEP if importance is None else None if importance == "default"
                            else importance),
                source=ChangeSet.Source.CLI, actor=ACTOR, clear_details=details is not None and not details.strip(),
                note_version=notes_services.UNCHECKED if note_version is None else note_version)
            version = notes_selectors.note_version_now(owner_id=self.user.pk, scope=item, topic=topic)
        if change is None:  # the importance it has already (a text as it is already: the store's no_change)
            raise CommandError(f"Nothing to change: {topic} in {self._label(item)} has that importance already.")
        said = f"Updated {topic} in {self._label(item)} (change #{change.pk}; version {version})."
        # ``note_version`` as PUT and PATCH /api/chats/memory/notes answer it: what a next checked edit sends
        self.emit({"updated": topic, "scope": item.name, "change_id": change.pk, "note_version": version,
                   **({"importance": None if importance == "default" else importance}
                      if importance is not None else {})}, said)

    def do_forget(self, *, topic: str, scope: str | None = None, yes: bool = False, note_version: str | None = None,
                  **options: Any) -> None:
        item = self._own_scope(scope)
        if not yes and not self._confirm(f"Forget {topic!r} in {self._label(item)}? [y/N] ", options):
            raise CommandError("Nothing was forgotten.")
        change = notes_services.note_upsert(
            owner_id=self.user.pk, scope=item, topic=topic, delete=True, source=ChangeSet.Source.CLI, actor=ACTOR,
            note_version=notes_services.UNCHECKED if note_version is None else note_version)
        self.emit({"forgot": topic, "scope": item.name, "change_id": change.pk},
                  f"Forgot {topic} in {self._label(item)} (change #{change.pk}; it is in the Trash: `memory trash` lists it).")

    def do_restore(self, *, entry_id: int, **_: Any) -> None:
        self._writes_allowed()
        change = notes_services.trash_restore(owner_id=self.user.pk, entry_id=entry_id, actor=ACTOR)
        paths = [f.path for f in change.files.all()]
        self.emit({"restored": entry_id, "change_id": change.pk, "files": paths},
                  f"Restored {len(paths)} file(s) from the Trash (change #{change.pk}).")

    def do_accept(self, *, proposal_id: int, **_: Any) -> None:
        self._writes_allowed()
        proposals.access_proposal(self.user, proposal_id)
        change = proposals.proposal_confirm(owner_id=self.user.pk, proposal_id=proposal_id, actor=ACTOR)
        self.emit({"accepted": proposal_id, "change_id": change.pk if change else None},
                  f"Accepted suggestion #{proposal_id}"
                  + (f" (change #{change.pk})." if change else "; memory already said exactly that."))

    def do_reject(self, *, proposal_id: int, **_: Any) -> None:
        proposal = proposals.access_proposal(self.user, proposal_id)
        proposals.proposal_reject(owner_id=self.user.pk, proposal_id=proposal_id, actor=ACTOR)
        # In the words the web, the API and the bots use for a no: "Dropped" ("Kept" for a note to forget).
        self.emit({"rejected": proposal_id},
                  f"Suggestion #{proposal_id}: {proposals.rejected_text(proposal)} It will not be suggested again.")

    def do_export(self, *, output: str | None = None, **_: Any) -> None:
        from localai_memory.memory.services import memory_export_all

        body = memory_export_all(user_id=self.user.pk)
        if output == "-":
            stream = getattr(self.stdout, "_out", sys.stdout)
            binary: Any = stream.buffer if hasattr(stream, "buffer") else stream
            binary.write(body)
            return
        target = Path(output or f"memory-{self.user.get_username()}.zip")
        try:
            target.write_bytes(body)
        except OSError as exc:
            raise CommandError(f"Cannot write {target}: {exc.strerror}") from None
        self.emit({"exported": str(target), "bytes": len(body)}, f"Wrote {target} ({len(body)} bytes).")

    def do_import(self, *, path: str, facts: bool = False, **options: Any) -> None:
        self._writes_allowed()
        if path == "-":
            stream = options.get("stdin") or sys.stdin
            data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
            data = data.encode() if isinstance(data, str) else data
        else:
            try:
                data = Path(path).read_bytes()
            except OSError as exc:
                raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
        name = "" if path == "-" else Path(path).name
        if facts:
            if importing.is_zip(data):
                raise CommandError(f"{path} is a zip (an export): leave out --facts to import it.")
            # read as the API and the Memory tab read a file that is no zip: one named .zip, or one that is not
            # text, is refused in their words rather than imported line by line
            text = facts_text(data, name=name)
            result = importing.import_facts(owner_id=self.user.pk, text=text, actor=ACTOR)
        else:  # as the API and the Memory tab read an upload: a zip, else a list of facts as plain text
            result = import_upload(owner_id=self.user.pk, data=data, name=name, actor=ACTOR)
        answer = import_answer(owner_id=self.user.pk, result=result)
        self.emit(answer.as_dict(), "\n".join(answer.lines))

    def do_clear(self, *, yes: bool = False, **options: Any) -> None:
        name = self.user.get_username()
        if not yes and not self._confirm(
                f"Erase every note of {name} for good (files, versions, changes, Trash, suggestions)? "
                "Type yes: ", options, word="yes"):
            raise CommandError("Nothing was erased.")
        deleted = memory_clear(owner_id=self.user.pk)
        left = memory_leftovers(owner_id=self.user.pk)
        if left:
            raise CommandError("Clear did not finish; still stored: "
                               + ", ".join(f"{what} {count}" for what, count in sorted(left.items())))
        # every memory add-on the user used keeps its own notes: each asked to forget them too (serving or not)
        addons = addons_forget_all(user_id=self.user.pk)
        addon = forget_summary(addons)
        erased = (f"Erased every note of {name}: nothing is left (files, versions, changes, Trash and "
                  "suggestions checked).")
        if addon == "failed":
            but = "But the memory add-on could not forget its own notes: clear them there."
            raise CommandError(" ".join([erased, but, *(a.message for a in addons if a.status != "forgot")]))
        self.emit({"cleared": True, "deleted": deleted, "left": left, "addon": addon,
                   "addons": [a.as_dict() for a in addons]},
                  erased + (" The memory add-on forgot its notes too." if addon == "forgot" else ""))

    def do_consolidate(self, **_: Any) -> None:
        result = consolidate_user(owner_id=self.user.pk, trigger="manual")
        if result.status != "done":
            raise CommandError(f"Nothing was suggested: {result.status} ({result.reason}).")
        self.emit(result.as_dict(), f"Read {result.chats} chat(s); {len(result.proposals)} suggestion(s) wait "
                                    f"for your answer (memory proposals --user {self.user.get_username()}).")

    def _label(self, scope: Scope) -> str:
        """The notes of ``scope`` as the API and the Memory tab name them (an agent's by its name)."""
        return notes_selectors.scope_label(owner_id=self.user.pk, scope=scope)

    def _own_scope(self, raw: str | None, *, writes_topic: str | None = None) -> Scope:
        """``--scope`` for a write: the person's own (``memory.selectors.owned_scope``: one of their agents or
        bots, or a kept folder's notes), else refused as the API refuses it."""
        return owned_scope(user_id=self.user.pk, raw=parse_scope(raw).name, writes_topic=writes_topic)

    def _confirm(self, prompt: str, options: dict[str, Any], *, word: str = "y") -> bool:
        stream = options.get("stdin") or sys.stdin
        self.stderr.write(prompt, ending="", style_func=str)  # stdout is the answer's (JSON with --json)
        self.stderr.flush()
        try:
            answer = stream.readline()
        except (OSError, ValueError):
            answer = ""
        answer = answer.strip().lower()
        return answer == word or (word == "y" and answer == "yes")

