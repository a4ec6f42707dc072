"""Invariants of the stored memory, checked from the database alone after any run (load, faults, tests).

``check_invariants()`` returns one ``Violation`` per offending row (an empty list means all is well):

* **every confirmed proposal has exactly one change set**: never two (a duplicated note), never none unless
  memory already held exactly that note when it was confirmed (a no-op confirm, proven from the versions),
  and no proposal change set exists for a proposal that is not confirmed (a half-saved confirm);
* **every file's current text equals the last change set's "after"** for it, and a file whose last change
  wrote text exists (nothing lost), and no file exists that no change set wrote;
* **no version chain has a gap**: versions run 1..n (f+1..f+n above the owner's ``VersionFloor`` f once their
  memory was erased), every change's "before" is the previous change's "after" (so no edit was silently
  overwritten), and every version row matches its change row;
* **no row belongs to two owners**: for every model with an owner (directly or through its parent rows),
  every row it points at — by foreign key, by a plain ``*_id`` reference, or by a note path naming an agent
  or a messaging binding — has the same owner.

Nothing here writes; it must stay cheap enough to run over 1,000 users × 40 notes in seconds (set-based SQL,
no per-row queries except for the rare confirmed-without-change case).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connections, models
from django.db.models import F, OuterRef, Subquery

#: At most this many rows are reported per check (the count says how many there were).
DEFAULT_LIMIT = 50

#: Plain integer columns that point at another model's row: (model, field, target model).
SOFT_REFERENCES: tuple[tuple[str, str, str], ...] = (
    ("notes.ChangeSet", "chat_id", "chats.Chat"),
    ("notes.ChangeSet", "proposal_id", "memory.Proposal"),
    ("memory.Proposal", "chat_id", "chats.Chat"),
    ("memory.Proposal", "conversation_id", "bridges.Conversation"),
    ("memory.Proposal", "requested_by_sender_id", "bridges.Sender"),
    ("chats.Chat", "binding_id", "bridges.Binding"),
    ("bridges.Notice", "proposal_id", "memory.Proposal"),
    ("bridges.Notice", "change_id", "notes.ChangeSet"),
)

#: Note paths that name another owned row: ``Memory/agents/<agent id>/…``, ``Memory/channels/<binding>-…``.
PATH_REFERENCES: tuple[tuple[str, str], ...] = (
    (r"^Memory/agents/([0-9]{1,18})/", "agents.Agent"),
    (r"^Memory/channels/([0-9]{1,18})-[0-9a-f]+/", "bridges.Binding"),
)

_SKIPPED_APPS = {"admin", "auth", "contenttypes", "sessions"}


@dataclass(frozen=True)
class Violation:
    """One row that breaks an invariant. ``check`` names the invariant; ``row`` identifies the offender."""

    check: str
    message: str
    row: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


def check_invariants(*, using: str = "default", limit: int = DEFAULT_LIMIT) -> list[Violation]:
    """Every violation found (at most ``limit`` per check, plus one ``…_more`` entry saying how many more)."""
    found: list[Violation] = []
    for check in CHECKS:
        rows = list(check(using))
        found.extend(rows[:limit])
        if len(rows) > limit:
            name = rows[0].check
            found.append(Violation(f"{name}_more", f"{len(rows) - limit} more rows break {name}",
                                   {"count": len(rows)}))
    return found


def summary(violations: list[Violation]) -> dict[str, int]:
    """How many violations of each check (``…_more`` entries counted into their check)."""
    counts: dict[str, int] = {}
    for violation in violations:
        if violation.check.endswith("_more"):
            name = violation.check[: -len("_more")]
            counts[name] = counts.get(name, 0) + int(violation.row.get("count", 0)) - DEFAULT_LIMIT
        else:
            counts[violation.check] = counts.get(violation.check, 0) + 1
    return counts


# --------------------------------------------------------------------------------------------------------
# SQL helpers
# --------------------------------------------------------------------------------------------------------


def _tables() -> dict[str, str]:
    from localai_memory.memory.models import Proposal
    from localai_memory.notes.models import ChangeSet, FileChange, FileVersion, NoteFile, VersionFloor

    return {"cs": ChangeSet._meta.db_table, "fc": FileChange._meta.db_table, "fv": FileVersion._meta.db_table,
            "nf": NoteFile._meta.db_table, "pr": Proposal._meta.db_table, "vf": VersionFloor._meta.db_table}


def _rows(using: str, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    with connections[using].cursor() as cursor:
        cursor.execute(sql.format(**_tables()), params or [])
        names = [column.name for column in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]


def _short(text: str | None, size: int = 60) -> str | None:
    if text is None:
        return None
    return text if len(text) <= size else text[:size] + "…"


# --------------------------------------------------------------------------------------------------------
# Proposals: exactly one change set per confirmed proposal
# --------------------------------------------------------------------------------------------------------


def _proposals_saved_twice(using: str) -> Iterator[Violation]:
    sql = """
        SELECT cs.proposal_id, array_agg(cs.id ORDER BY cs.id) AS change_ids
        FROM {cs} cs WHERE cs.proposal_id IS NOT NULL AND cs.source = 'proposal'
        GROUP BY cs.proposal_id HAVING count(*) > 1
    """
    for row in _rows(using, sql):
        yield Violation("proposal_saved_twice",
                        f"proposal {row['proposal_id']} was saved {len(row['change_ids'])} times "
                        f"(change sets {row['change_ids']})", row)


def _proposal_changes_mismatch(using: str) -> Iterator[Violation]:
    """A confirmed proposal's change set must be the one that names it; a proposal change set must belong to
    a confirmed proposal (otherwise the note was saved but the proposal still waits: half a confirm)."""
    sql = """
        SELECT p.id AS proposal_id, p.status, p.change_set_id, cs.proposal_id AS change_names
        FROM {pr} p JOIN {cs} cs ON cs.id = p.change_set_id
        WHERE cs.proposal_id IS DISTINCT FROM p.id OR cs.source <> 'proposal' OR p.status <> 'confirmed'
    """
    for row in _rows(using, sql):
        yield Violation("proposal_change_mismatch",
                        f"proposal {row['proposal_id']} ({row['status']}) points at change set "
                        f"{row['change_set_id']}, which names proposal {row['change_names']}", row)
    sql = """
        SELECT cs.id AS change_id, cs.proposal_id, p.status
        FROM {cs} cs LEFT JOIN {pr} p ON p.id = cs.proposal_id
        WHERE cs.source = 'proposal' AND cs.proposal_id IS NOT NULL
          AND (p.id IS NULL OR p.status <> 'confirmed' OR p.change_set_id IS DISTINCT FROM cs.id)
          AND NOT EXISTS (SELECT 1 FROM {cs} other WHERE other.proposal_id = cs.proposal_id
                          AND other.source = 'proposal' AND other.id <> cs.id)
    """
    for row in _rows(using, sql):
        state = "missing" if row["status"] is None else row["status"]
        yield Violation("change_for_unconfirmed_proposal",
                        f"change set {row['change_id']} saved proposal {row['proposal_id']}, which is {state} "
                        "or points elsewhere (half a confirm)", row)


def _confirmed_without_change(using: str) -> Iterator[Violation]:
    sql = """
        SELECT p.id, p.owner_id, p.scope_kind, p.scope_key, p.topic, p.summary, p.details, p.delete,
               p.decided_at
        FROM {pr} p
        WHERE p.status = 'confirmed' AND p.change_set_id IS NULL AND p.provider = ''
          AND NOT EXISTS (SELECT 1 FROM {cs} cs WHERE cs.proposal_id = p.id AND cs.source = 'proposal')
    """
    for row in _rows(using, sql):
        if not _was_already_saved(using, row):
            yield Violation("confirmed_without_change",
                            f"proposal {row['id']} is confirmed but nothing was saved, and memory did not "
                            "hold that note when it was confirmed (a lost note)", {"proposal_id": row["id"]})


def _was_already_saved(using: str, proposal: dict[str, Any]) -> bool:
    """Did the index (as it was when the proposal was confirmed) already say exactly this?"""
    from localai_memory.core.errors import InvalidInput
    from localai_memory.notes.paths import Scope, parse_index

    try:
        scope = Scope(proposal["scope_kind"], proposal["scope_key"])
    except InvalidInput:
        return False
    versions = _rows(using, """
        SELECT content, deleted FROM {fv} WHERE owner_id = %s AND path = %s AND created_at <= %s
        ORDER BY version DESC LIMIT 2
    """, [proposal["owner_id"], scope.index_path, proposal["decided_at"]])
    if not versions:
        return bool(proposal["delete"])  # forgetting a note of an index that never existed: nothing to do
    for version in versions:  # the one current at the decision, or (clock skew of a racing writer) the one before
        try:
            entries = [] if version["deleted"] else parse_index(version["content"])
        except InvalidInput:
            continue
        entry = next((e for e in entries if e.topic == proposal["topic"]), None)
        if proposal["delete"] and entry is None:
            return True
        if not proposal["delete"] and entry is not None and entry.summary == proposal["summary"]:
            return True
    return False


# --------------------------------------------------------------------------------------------------------
# Files: current text, versions, chains
# --------------------------------------------------------------------------------------------------------


def _current_text(using: str) -> Iterator[Violation]:
    sql = """
        WITH last AS (
            SELECT DISTINCT ON (cs.owner_id, fc.path) cs.owner_id, fc.path, fc.after, fc.after_version,
                   fc.change_set_id
            FROM {fc} fc JOIN {cs} cs ON cs.id = fc.change_set_id
            ORDER BY cs.owner_id, fc.path, fc.after_version DESC NULLS LAST, fc.id DESC
        )
        SELECT coalesce(nf.owner_id, last.owner_id) AS owner_id, coalesce(nf.path, last.path) AS path,
               nf.id AS file_id, nf.content, nf.version, last.change_set_id, last.after, last.after_version,
               last.owner_id IS NULL AS unwritten
        FROM last FULL OUTER JOIN {nf} nf ON nf.owner_id = last.owner_id AND nf.path = last.path
        WHERE last.owner_id IS NULL
           OR (nf.id IS NULL AND last.after IS NOT NULL)
           OR (nf.id IS NOT NULL AND (nf.content IS DISTINCT FROM last.after
                                      OR nf.version IS DISTINCT FROM last.after_version))
    """
    for row in _rows(using, sql):
        where = f"user {row['owner_id']} {row['path']}"
        if row["unwritten"]:
            yield Violation("file_without_change", f"{where} exists but no change set ever wrote it",
                            {"owner_id": row["owner_id"], "path": row["path"]})
        elif row["file_id"] is None:
            yield Violation("file_lost", f"{where}: change set {row['change_set_id']} wrote version "
                                         f"{row['after_version']}, but the file is gone",
                            {"owner_id": row["owner_id"], "path": row["path"], "change_set": row["change_set_id"]})
        else:
            yield Violation("current_text_differs",
                            f"{where} holds v{row['version']} {_short(row['content'])!r}, but its last change "
                            f"set {row['change_set_id']} wrote v{row['after_version']} {_short(row['after'])!r}",
                            {"owner_id": row["owner_id"], "path": row["path"], "change_set": row["change_set_id"]})


def _version_gaps(using: str) -> Iterator[Violation]:
    sql = """
        SELECT fv.owner_id, fv.path, count(*) AS n, min(fv.version) AS first, max(fv.version) AS last
        FROM {fv} fv LEFT JOIN {vf} vf ON vf.owner_id = fv.owner_id
        GROUP BY fv.owner_id, fv.path, vf.version
        HAVING min(fv.version) <> coalesce(vf.version, 0) + 1 OR max(fv.version) <> coalesce(vf.version, 0) + count(*)
    """
    for row in _rows(using, sql):
        yield Violation("version_gap", f"user {row['owner_id']} {row['path']} has {row['n']} versions numbered "
                                       f"{row['first']}..{row['last']}", row)


def _change_chains(using: str) -> Iterator[Violation]:
    """Change n of a file must start from what change n-1 left: otherwise an edit was overwritten unseen."""
    sql = """
        SELECT owner_id, path, change_set_id, after_version, n, before_version, prev_version,
               before IS DISTINCT FROM prev_after AS before_differs
        FROM (
            SELECT cs.owner_id, fc.path, fc.change_set_id, fc.before, fc.before_version, fc.after_version,
                   lag(fc.after) OVER w AS prev_after, lag(fc.after_version) OVER w AS prev_version,
                   coalesce(vf.version, 0) + row_number() OVER w AS n
            FROM {fc} fc JOIN {cs} cs ON cs.id = fc.change_set_id LEFT JOIN {vf} vf ON vf.owner_id = cs.owner_id
            WINDOW w AS (PARTITION BY cs.owner_id, fc.path ORDER BY fc.after_version, fc.id)
        ) chain
        WHERE after_version IS DISTINCT FROM n
           OR before IS DISTINCT FROM prev_after
           OR before_version IS DISTINCT FROM (CASE WHEN prev_after IS NULL THEN NULL ELSE prev_version END)
    """
    for row in _rows(using, sql):
        where = f"user {row['owner_id']} {row['path']} (change set {row['change_set_id']})"
        if row["after_version"] != row["n"]:
            message = f"{where} wrote version {row['after_version']} as change number {row['n']}"
            yield Violation("version_gap", message, row)
        else:
            message = (f"{where} started from v{row['before_version']} but the previous change left "
                       f"v{row['prev_version']}" + (" with other text" if row["before_differs"] else ""))
            yield Violation("lost_update", message, row)


def _versions_match_changes(using: str) -> Iterator[Violation]:
    sql = """
        SELECT fv.owner_id, fv.path, fv.version, fv.change_set_id, fc.id IS NULL AS missing
        FROM {fv} fv LEFT JOIN {fc} fc
          ON fc.change_set_id = fv.change_set_id AND fc.path = fv.path AND fc.after_version = fv.version
        WHERE fc.id IS NULL OR fv.deleted <> (fc.after IS NULL) OR (fc.after IS NOT NULL AND fv.content <> fc.after)
        UNION ALL
        SELECT cs.owner_id, fc.path, fc.after_version, fc.change_set_id, TRUE
        FROM {fc} fc JOIN {cs} cs ON cs.id = fc.change_set_id
        WHERE NOT EXISTS (SELECT 1 FROM {fv} fv WHERE fv.owner_id = cs.owner_id AND fv.path = fc.path
                          AND fv.version = fc.after_version AND fv.change_set_id = fc.change_set_id)
    """
    for row in _rows(using, sql):
        state = "has no matching row" if row["missing"] else "differs from its change row"
        yield Violation("version_differs_from_change",
                        f"user {row['owner_id']} {row['path']} v{row['version']} (change set "
                        f"{row['change_set_id']}) {state}", row)


def _empty_change_sets(using: str) -> Iterator[Violation]:
    # A change set of importances only (``ChangeSet.importance``) touches no file by design, and neither does
    # the audit's record of a note handed to a memory add-on (source ``addon``: the add-on keeps the note).
    sql = ("SELECT cs.id, cs.owner_id, cs.source FROM {cs} cs WHERE NOT EXISTS (SELECT 1 FROM {fc} fc "
           "WHERE fc.change_set_id = cs.id) AND (cs.importance IS NULL OR cs.importance = '[]'::jsonb) "
           "AND cs.source <> 'addon'")
    for row in _rows(using, sql):
        yield Violation("empty_change_set", f"change set {row['id']} ({row['source']}) touched no file", row)


# --------------------------------------------------------------------------------------------------------
# Owners: no row belongs to two owners
# --------------------------------------------------------------------------------------------------------


def owner_path(model: type[models.Model], depth: int = 0) -> str | None:
    """The ORM path from ``model`` to its owner's id (``owner_id``, ``change_set__owner_id``, …) or None.

    A direct ``owner``/``user`` foreign key to the user model wins; otherwise the first required (not
    nullable) foreign key whose target has an owner. Unowned models (the user itself, Django's) get None.
    """
    user_model = get_user_model()
    if model is user_model or model._meta.app_label in _SKIPPED_APPS or depth > 3:
        return None
    fks = [f for f in model._meta.concrete_fields if isinstance(f, models.ForeignKey)]
    for f in fks:
        if f.name in ("owner", "user") and f.related_model is user_model:
            return f.attname
    for f in fks:
        if f.null or f.related_model is user_model or f.related_model is model:
            continue
        parent = owner_path(_target(f), depth + 1)
        if parent is not None:
            return f"{f.name}__{parent}"
    return None


def _target(foreign_key: models.ForeignKey[Any, Any]) -> type[models.Model]:
    """The model ``foreign_key`` points at: a class once the app registry is ready (never ``"self"``)."""
    return cast("type[models.Model]", foreign_key.related_model)


def _model(label: str) -> type[models.Model] | None:
    try:
        return apps.get_model(label)
    except LookupError:
        return None


def _owned_models() -> list[tuple[type[models.Model], str]]:
    found = []
    for model in apps.get_models():
        path = owner_path(model)
        if path is not None and not model._meta.proxy:
            found.append((model, path))
    return found


def _two_owners(using: str, limit: int = DEFAULT_LIMIT + 1) -> Iterator[Violation]:
    for model, path in _owned_models():
        first_hop = path.split("__", 1)[0]
        for f in model._meta.concrete_fields:
            if not isinstance(f, models.ForeignKey) or f.name == first_hop or f.attname == first_hop:
                continue
            target_path = owner_path(_target(f))
            if target_path is None:
                continue
            rows = (model._default_manager.using(using).filter(**{f"{f.name}__isnull": False})
                    .exclude(**{path: F(f"{f.name}__{target_path}")}).values_list("pk", flat=True)[:limit])
            for pk in rows:
                yield Violation("two_owners", f"{model._meta.label} {pk} and its {f.name} belong to different "
                                              "owners", {"model": model._meta.label, "pk": pk, "field": f.name})
    for label, attname, target_label in SOFT_REFERENCES:
        source, target = _model(label), _model(target_label)
        if source is None or target is None or attname not in {f.attname for f in source._meta.concrete_fields}:
            continue
        source_path, referenced_path = owner_path(source), owner_path(target)
        if source_path is None or referenced_path is None:
            continue
        referenced = target._default_manager.using(using).filter(pk=OuterRef(attname)).values(referenced_path)[:1]
        rows = (source._default_manager.using(using).filter(**{f"{attname}__isnull": False})
                .annotate(_ref_owner=Subquery(referenced)).filter(_ref_owner__isnull=False)
                .exclude(**{source_path: F("_ref_owner")}).values_list("pk", flat=True)[:limit])
        for pk in rows:
            yield Violation("two_owners", f"{label} {pk} names {target_label} by {attname} of another owner",
                            {"model": label, "pk": pk, "field": attname})
    yield from _path_owners(using, limit)


def _path_owners(using: str, limit: int) -> Iterator[Violation]:
    """A note path that names an agent or a binding must name one of the note owner's."""
    from localai_memory.notes.models import FileChange, FileVersion, NoteFile, TrashFile

    for pattern, target_label in PATH_REFERENCES:
        target = _model(target_label)
        if target is None:
            continue
        target_path = owner_path(target)
        if target_path is None:
            continue
        for model in (NoteFile, FileVersion, FileChange, TrashFile):
            path = owner_path(model)
            if path is None:
                continue
            rows = (model._default_manager.using(using).filter(path__regex=pattern)
                    .values_list("pk", path, "path")[: 100_000])
            keys = {int(m.group(1)) for _, _, p in rows if (m := re.match(pattern, p))}
            owners = dict(target._default_manager.using(using).filter(pk__in=keys).values_list("pk", target_path))
            bad = 0
            for pk, owner, note_path in rows:
                match = re.match(pattern, note_path)
                key = int(match.group(1)) if match else None
                if key in owners and owners[key] != owner:
                    bad += 1
                    if bad > limit:
                        return
                    yield Violation("two_owners", f"{model._meta.label} {pk} ({note_path}) is in a folder of "
                                                  f"{target_label} {key}, which has another owner",
                                    {"model": model._meta.label, "pk": pk, "path": note_path})


CHECKS: tuple[Callable[[str], Iterator[Violation]], ...] = (
    _proposals_saved_twice,
    _proposal_changes_mismatch,
    _confirmed_without_change,
    _current_text,
    _version_gaps,
    _change_chains,
    _versions_match_changes,
    _empty_change_sets,
    _two_owners,
)
