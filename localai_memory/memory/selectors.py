"""Reads of memory settings (what a user chose, with the defaults for a user who never chose; when they last
forgot everything, ``forgotten_after``), and the checks that a scope or a folder a person names is theirs to
write (``owned_scope``, ``file_folder_owned``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from localai_memory.notes.models import NoteFile
from localai_memory.notes.paths import ROOT, IndexEntry, Scope

from .models import AddonForgetRequest, MemorySettings, MessagingSave, Proposal, SaveMode
from .providers import BUILTIN, OFF, canonical, provider_status

#: ``MemoryState.forgot_at`` of a user who never forgot everything: earlier than any forget.
NEVER_FORGOT = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class MemoryState:
    enabled: bool  # the user's switch (provider Off is the same switch)
    enabled_set: bool
    save_mode: str
    save_mode_set: bool
    messaging_save: str
    provider: str  # what serves now: builtin, off, or the add-on's name
    provider_choice: str  # the stored choice (builtin or an add-on), kept while the switch is off
    provider_state: str  # builtin, off, addon, addon_unavailable
    server_files_on: bool
    consolidation_enabled: bool
    mcp_propose_enabled: bool
    #: when the user last forgot everything (``NEVER_FORGOT``: never)
    forgot_at: datetime = NEVER_FORGOT
    #: the serving add-on keeps notes apart per namespace (``providers.keeps_namespaces``)
    addon_namespaces: bool = False

    @property
    def available(self) -> bool:
        """Memory can serve now: switched on, the provider runs, and the server has files on."""
        return self.enabled and self.server_files_on and self.provider_state in ("builtin", "addon")

    def as_api(self) -> dict:
        body = {
            "enabled": self.enabled,
            "enabled_set": self.enabled_set,
            "save_mode": self.save_mode,
            "messaging_save": self.messaging_save,
            "save_mode_set": self.save_mode_set,
            "provider": self.provider,
            "available": self.available,
        }
        if self.provider_state == "addon_unavailable":
            body["unavailable"] = {"code": "memory_provider_unavailable", "provider": self.provider_choice,
                                   "message": f"The memory provider {self.provider_choice!r} is not running, so "
                                              "memory is off. Pick it again once it runs, or pick Built-in."}
        elif not self.server_files_on:
            body["unavailable"] = {"code": "server_files_off", "provider": self.provider,
                                   "message": "This server has files turned off, and notes are files."}
        return body


def memory_state(*, user_id: int) -> MemoryState:
    return memory_state_of(MemorySettings.objects.filter(user_id=user_id).first(), user_id=user_id)


def memory_state_of(row: MemorySettings | None, *, user_id: int) -> MemoryState:
    """The state a settings row stands for (``None``: the user never chose anything, so the defaults)."""
    if row is None:
        row = MemorySettings(user_id=user_id)
    enabled = row.enabled and not (row.legacy_addon_disabled and not row.enabled_set)
    namespaces = False
    if not enabled:
        state, provider = OFF, OFF
    else:
        (state, namespaces), provider = provider_status(row.provider), canonical(row.provider)
    return MemoryState(
        enabled=enabled,
        enabled_set=row.enabled_set,
        save_mode=row.save_mode if row.save_mode in SaveMode.values else SaveMode.ASK,
        save_mode_set=row.save_mode_set,
        messaging_save=row.messaging_save if row.messaging_save in MessagingSave.values else MessagingSave.ASK,
        provider=provider if provider != BUILTIN or enabled else OFF,
        provider_choice=row.provider,
        provider_state=state,
        server_files_on=bool(settings.FILES_ENABLED),
        consolidation_enabled=row.consolidation_enabled,
        mcp_propose_enabled=row.mcp_propose_enabled,
        forgot_at=row.forgot_at or NEVER_FORGOT,
        addon_namespaces=namespaces,
    )


def addons_used(*, user_id: int) -> list[str]:
    """The memory add-ons that may hold the user's notes: each they picked at some time
    (``MemorySettings.addons_used``) and the one their settings name now, whether it serves or not."""
    row = MemorySettings.objects.filter(user_id=user_id).values_list("provider", "addons_used").first()
    if row is None:
        return []
    choice, used = row
    names = {str(name) for name in (used if isinstance(used, list) else [])} | {canonical(choice)}
    return sorted(names - {BUILTIN, OFF})


def addon_forget_requests(*, owner_id: int) -> list[AddonForgetRequest]:
    """The owner's requests to memory add-ons that could not drop a namespace yet (``AddonForgetRequest``),
    oldest first."""
    return list(AddonForgetRequest.objects.filter(owner_id=owner_id))


def forgotten_after(*, owner_id: int, moment: datetime) -> bool:
    """Whether the owner forgot everything (Forget everything, the terminal's clear) after ``moment``: what was
    read or said before it may become neither a note nor a suggestion. Ask under the owner's note lock
    (``notes.services.lock_owner``), which the forget holds while it records the time
    (``memory.services.settings_mark_forgotten``): a forget that committed is seen, and a later one waits."""
    return MemorySettings.objects.filter(user_id=owner_id, forgot_at__gt=moment).exists()


def owned_scope(*, user_id: int, raw: object, writes_topic: str | None = None) -> Scope:
    """A scope a client named (``user``, ``agent:<id>``, ``channel:<key>``; ``user`` when absent), if it is the
    user's own: an agent's notes only of one of their agents, a conversation's only of one of their bots, or
    the folder of one they deleted whose notes they kept (the Deleted agents tab: still theirs to read, edit
    and delete); another's is a 404, as if it did not exist. ``writes_topic`` names the topic a write saves
    (``""``: a new one): a kept folder takes edits of the notes it holds, never a new note, since no chat
    would read it (410 ``agent_deleted`` / ``bot_deleted``)."""
    from bridges.models import Binding
    from localai_memory.agents.models import Agent
    from localai_memory.core.errors import Gone, NotFound
    from localai_memory.notes.models import NoteFile
    from localai_memory.notes.paths import TOPIC_RE, parse_index
    from localai_memory.notes.selectors import index_text

    scope = Scope.parse(raw if raw not in (None, "") else "user")
    if scope.kind == "user":
        return scope
    # An agent's notes, or a conversation's: ``<bot's id>-<hash>`` (``notes.paths.channel_key``). Only the
    # id as written names it: "07" is a folder of its own, which no chat of agent 7 reads.
    what = "agent" if scope.kind == "agent" else "bot"
    number = scope.holder_id or 0  # 0 is nobody's
    rows = Agent.objects.filter(pk=number) if what == "agent" else Binding.objects.filter(pk=number)
    if list(rows.values_list("owner_id", flat=True)) == [user_id]:
        return scope
    # Not one of theirs: a folder of their own notes by that name (a deleted one's, or one an import or an
    # older version made) is still theirs to edit; anything else is nobody's they may name.
    if not NoteFile.objects.filter(owner_id=user_id, path__startswith=f"{scope.root}/").exists():
        raise NotFound(f"No such {what}.", code="not_found")
    if writes_topic and not TOPIC_RE.match(writes_topic):
        return scope  # the write itself says what is wrong with the name (400)
    if writes_topic is not None and writes_topic not in {
            entry.topic for entry in parse_index(index_text(owner_id=user_id, scope=scope))}:
        raise Gone(f"No {what} of yours reads this folder (it was deleted): its notes can be edited or "
                   "deleted, not added to.", code=f"{what}_deleted")
    return scope


def file_folder_owned(*, user_id: int, path: str) -> None:
    """Refuse (``owned_scope``'s 404 or 410) a file the Files page or API would create in a folder that is not
    the person's: another's agent or bot, or a new note in a deleted one's kept folder. A file that exists
    is theirs already, to edit or delete."""
    from localai_memory.notes.models import NoteFile
    from localai_memory.notes.paths import parse_path

    note = parse_path(path)
    if note.scope.kind != "user" and not NoteFile.objects.filter(owner_id=user_id, path=note.path).exists():
        owned_scope(user_id=user_id, raw=note.scope.name, writes_topic=note.topic or "")


def account_mark(*, owner_id: int) -> str:
    """What an export records of the account it was made in (``notes.services.FOLDERS_FILE``'s ``account``),
    so that an import into that same account knows the folders' ids are its own agents' and bots': an id stays
    with its agent through a rename and is never given to another, where a name may change or be shared.

    A keyed hash of the account's id and the moment it was made: it tells neither, and two servers' marks
    differ even where they share a key (a development one) and an account id. A new ``SECRET_KEY`` gives
    new marks; an older export then goes by the names it records, as another account's does."""
    from django.contrib.auth import get_user_model
    from django.utils.crypto import salted_hmac

    joined = get_user_model().objects.filter(pk=owner_id).values_list("date_joined", flat=True).first()
    made = joined.isoformat() if joined is not None else ""
    return salted_hmac("localai_memory.export.account", f"{owner_id}:{made}", algorithm="sha256").hexdigest()[:32]


def folder_holders(*, owner_id: int, roots: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Whose each agent's and conversation's folder of ``roots`` (``Memory/agents/<id>``,
    ``Memory/channels/<key>``) is in the owner's account, by root: ``{"agent": name}`` (with ``"deleted":
    True`` for the notes kept from one they deleted) or ``{"bot": name, "platform": …}``. An export records it
    beside the notes (``notes.services.FOLDERS_FILE``), since ids differ between accounts and servers: an
    import finds the agent or bot of the same name there. A folder that names none of theirs is left out."""
    from bridges.models import Binding
    from localai_memory.agents.selectors import agent_names, deleted_agent_names

    keys = {kind: {root.split("/")[2] for root in roots if root.startswith(f"{ROOT}/{kind}/")}
            for kind in ("agents", "channels")}
    holders: dict[str, dict[str, Any]] = {}
    if keys["agents"]:
        live, deleted = agent_names(owner_id), deleted_agent_names(owner_id)
        for key in keys["agents"]:
            if key in live:
                holders[Scope.agent(key).root] = {"agent": live[key]}
            elif key in deleted:
                holders[Scope.agent(key).root] = {"agent": deleted[key], "deleted": True}
    if keys["channels"]:
        bots = {str(pk): {"bot": name, "platform": platform} for pk, name, platform in
                Binding.objects.filter(owner_id=owner_id).values_list("pk", "name", "platform")}
        for key in keys["channels"]:
            if (bot := bots.get(key.split("-", 1)[0])) is not None:
                holders[Scope("channel", key).root] = dict(bot)
    return holders


def topics_in_use(*, owner_id: int, scope: Scope, entries: list[IndexEntry]) -> set[str]:
    """Topics a new built-in note of ``scope`` must not take: its index's (``entries``, as the caller read them
    under the owner's lock), a topic file's without a line, and a waiting proposal's for the built-in notes
    (confirming it would replace the note). A proposal waiting for a memory add-on (``Proposal.provider``) takes
    no topic here: confirmed, it goes to the add-on's own notes and never replaces a built-in one."""
    prefix = f"{scope.root}/"
    files = NoteFile.objects.filter(owner_id=owner_id, path__startswith=prefix).values_list("path", flat=True)
    waiting = Proposal.objects.filter(owner_id=owner_id, status=Proposal.Status.PENDING, scope_kind=scope.kind,
                                      scope_key=scope.key or "", provider="").values_list("topic", flat=True)
    return ({e.topic for e in entries} | {Path(p).stem for p in files if "/" not in p[len(prefix):]}
            | set(waiting))
