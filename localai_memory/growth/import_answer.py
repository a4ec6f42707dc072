"""Import as the API, the Memory tab and the terminal take it in and give it back, so the three agree.

``import_upload`` reads an uploaded file the one way all three read it: an export zip, or a list of facts as
plain text. A file that is neither (not UTF-8, a file named .zip that is no zip; another tool's JSON is refused
by ``importing.parse_facts``) is a 400 that says what was expected, before anything is written.

``import_answer`` is what an import did, in the same words everywhere: the counts, where a folder went and
why one was skipped, and each suggestion that waits in the inbox with when it expires. A suggestion waits
24 hours (``policy.PROPOSAL_TTL``, the spec's rule for every proposal); one nobody answers by then is not
saved, so an import that only listed the suggestions' ids let them lapse unseen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from localai_memory.core.errors import InvalidInput, TooLarge
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_scope
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import NoteFile
from localai_memory.notes.paths import Scope, parse_index, parse_path

from . import importing

#: What an import says of an uploaded file that is neither a zip nor text.
NOT_TEXT = ("The file is neither a zip nor UTF-8 text. Import the zip that Export makes, or a list of facts as "
            "plain text, one fact a line.")
#: What the answer says after the suggestions it lists with their time.
EXPIRES = "A suggestion not answered by then expires, and nothing of it is saved."
#: How the answer names a suggestion for a note the owner deleted, which is in their Trash (``import_deleted``).
DELETED = "you deleted it; it is in your Trash"


def largest_file() -> int:
    """The largest file an upload imports: the largest zip, or the server's body limit when that is smaller
    (the body may pass it by a form's framing: ``core.middleware.MULTIPART_ROOM``)."""
    return min(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or importing.ZIP_MAX_BYTES, importing.ZIP_MAX_BYTES)


def read_upload(upload: UploadedFile) -> bytes:
    """An uploaded file's bytes; TooLarge (413) past ``largest_file``, before it is read into memory."""
    limit = largest_file()
    if (upload.size or 0) > limit:
        raise TooLarge(too_big(limit), code="import_too_large")
    return upload.read()


def size_words(size: int) -> str:
    """A number of bytes as the answer says it: "1 MB (1048576 bytes)", "64 KB (65536 bytes)", "900 bytes"."""
    for unit, name in ((1024 * 1024, "MB"), (1024, "KB")):
        if size >= unit:
            return f"{size / unit:.3g} {name} ({size} bytes)"
    return f"{size} bytes"


def too_big(limit: int) -> str:
    """What an import says of a file past ``limit`` bytes (the largest zip, or the server's body limit)."""
    return f"The file is too big to import: it may be at most {size_words(limit)}. Nothing was imported."


def too_long(limit: int) -> str:
    """What an import says of facts posted past the server's body limit of ``limit`` bytes (unread: a list is
    at most ``importing.FACTS_MAX_CHARS`` characters anyway)."""
    return (f"The facts are too long to import: this server takes at most {size_words(limit)} in one form, "
            f"and a list at most {importing.FACTS_MAX_CHARS} characters. Nothing was imported.")


def import_upload(*, owner_id: int, data: bytes, name: str = "", actor: str = "you") -> importing.ImportResult:
    """Import an uploaded file (``name`` as it was uploaded, "" when unknown): a zip as an export, anything else
    as a list of facts. Raises as ``importing.import_zip`` and ``import_facts`` do, and InvalidInput (400
    ``invalid_import``) for a file named .zip that is not one, or one that is not UTF-8 text."""
    if importing.is_zip(data):
        return importing.import_zip(owner_id=owner_id, data=data, actor=actor)
    return importing.import_facts(owner_id=owner_id, text=facts_text(data, name=name), actor=actor)


def facts_text(data: bytes, *, name: str = "") -> str:
    """A file that is no zip read as a list of facts (``name`` as it was given, "" when unknown): its text.
    InvalidInput (400 ``invalid_import``) for a file named .zip (a damaged download, another program's archive:
    not a list of facts) and for one that is not UTF-8 text, in the words the API, the Memory tab and the
    terminal all say (``memory import --facts`` reads a file with it too)."""
    if name.lower().endswith(".zip"):
        raise InvalidInput(f"“{name[-100:]}” is named .zip but is not a zip file. Import the zip that Export "
                           "makes, or a list of facts as plain text, one fact a line.", code="invalid_import")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(NOT_TEXT, code="invalid_import") from None


@dataclass(frozen=True)
class Waiting:
    """A suggestion an import left in the inbox (made now, or made before and still waiting)."""

    id: int
    scope: Scope
    where: str  # "" for the owner's own notes, else "agent “Cook”", …
    topic: str
    reason: str
    expires_at: datetime

    @property
    def url(self) -> str:
        return f"/inbox/#proposal-{self.id}"

    @property
    def words(self) -> str:
        """“home” (#12), “tone” in agent “Cook” (#15), “diet” (#14, you deleted it; …)."""
        why = f", {DELETED}" if self.reason == "import_deleted" else ""
        return f"“{self.topic}”{' in ' + self.where if self.where else ''} (#{self.id}{why})"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "scope": self.scope.name, "where": self.where, "topic": self.topic, "reason": self.reason,
                "expires_at": self.expires_at.isoformat(), "url": self.url}


def when(at: datetime) -> str:
    """A time as the answer says it: "3 Jun 2025, 14:05 UTC" (the inbox card's way, with the year)."""
    at = at.astimezone(UTC)
    return f"{at.day} {at:%b %Y, %H:%M} UTC"


@dataclass(frozen=True)
class ImportAnswer:
    result: importing.ImportResult
    added: int  # notes added (written back into an empty account: the lines of its indexes)
    inbox: list[Waiting]  # the suggestions made now, then those that waited already

    @property
    def summary(self) -> str:
        result = self.result
        return (f"Imported: {self.added} note(s) added, {len(result.proposals)} waiting for your answer, "
                f"{len(result.unchanged)} unchanged, {len(result.skipped)} skipped."
                + (f" {len(result.waiting)} were suggested before and still wait." if result.waiting else ""))

    @property
    def waiting_sentence(self) -> str:
        """Each suggestion in the inbox and until when it waits ("" when there is none)."""
        if not self.inbox:
            return ""
        by_time: dict[str, list[str]] = {}
        for item in self.inbox:
            by_time.setdefault(when(item.expires_at), []).append(item.words)
        listed = "; ".join(f"{', '.join(names)} until {at}" for at, names in by_time.items())
        return f"Waiting in your inbox for your answer: {listed}. {EXPIRES}"

    @property
    def lines(self) -> list[str]:
        """The answer in words, a line each (what the terminal prints and the API's ``message``)."""
        lines = [self.summary]
        if self.inbox:
            lines.append(self.waiting_sentence)
        return lines + folder_lines(self.result.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return {**self.result.as_dict(), "inbox": [item.as_dict() for item in self.inbox],
                "message": "\n".join(self.lines)}


def folder_lines(result: Mapping[str, Any]) -> list[str]:
    """Where each agent's or conversation's folder of a zip went, where it did not simply go back to its agent
    or bot, and why one was not imported: a line each, from an import's result as ``ImportResult.as_dict``
    gives it (the Memory tab shows the lines of the answer it kept)."""
    lines = [f"{move['from']} → {move['to']} (“{move['name']}”)" for move in result.get("moved", [])]
    lines += [f"{back['folder']} back to “{back['now']}”, renamed since (“{back['name']}” in the export)"
              for back in result.get("renamed", [])]
    lines += [f"{kept['folder']} to the notes kept from the deleted agent “{kept['name']}” (Deleted agents on "
              "the Memory tab; no chat reads them)" for kept in result.get("deleted_agents", [])]
    lines += [f"{kept['folder']} back to the notes left from {_bot_words(kept)}, which you removed (Files; no chat "
              "reads them)" for kept in result.get("removed_bots", [])]
    lines += [f"Skipped {skip['path']}: {skip['reason']}" for skip in result.get("skipped", [])]
    return lines


def _bot_words(bot: Mapping[str, str]) -> str:
    """A removed bot as the answer names it: "the Telegram bot “Home”", or "a bot of yours" when the export names
    none."""
    if not bot.get("name"):
        return "a bot of yours"
    from bridges.models import Platform

    platform = bot.get("platform", "")
    label = dict(Platform.choices).get(platform, platform)
    return f"the {label + ' ' if label else ''}bot “{bot['name']}”"


def import_answer(*, owner_id: int, result: importing.ImportResult) -> ImportAnswer:
    """What ``result`` did, with the owner's suggestions it names as they are now (their scope, expiry)."""
    added = len(result.added)
    if result.mode == "restored":  # written back file by file: the notes are the lines of its indexes
        indexes = NoteFile.objects.filter(owner_id=owner_id,
                                          path__in=[p for p in result.written if parse_path(p).is_index])
        added = sum(len(parse_index(index.content)) for index in indexes)
    ids = [*result.proposals, *(pk for pk in result.waiting if pk not in result.proposals)]
    found = {proposal.pk: proposal for proposal in Proposal.objects.filter(owner_id=owner_id, pk__in=ids)}
    inbox: list[Waiting] = []
    for pk in ids:
        proposal = found.get(pk)
        if proposal is None:
            continue
        scope = proposal_scope(proposal)
        where = "" if scope.kind == "user" else notes_selectors.scope_label(owner_id=owner_id, scope=scope)
        inbox.append(Waiting(id=pk, scope=scope, where=where, topic=proposal.topic, reason=proposal.reason,
                             expires_at=proposal.expires_at))
    return ImportAnswer(result=result, added=added, inbox=inbox)
