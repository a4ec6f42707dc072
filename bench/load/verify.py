"""Prove from the database that every write the app acknowledged is there exactly once, and that a write it
refused or failed (409, 503, a dropped connection) is there at most once — and say how many of those were
saved anyway (an error answer for a write that did happen would mislead the person; it is counted, not
hidden). Runs in the orchestrator after the driver, with Django configured for the bench database."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from bench.load.driver import proposed_summary

EDIT = re.compile(r"edit ([0-9a-f]{10})\.")
NOTE = re.compile(r"Note ([0-9a-f]{10})")


def verify(ledger: dict[str, list[list[Any]]], numbers_to_ids: dict[int, int]) -> dict[str, Any]:
    from localai_memory.memory.models import Proposal
    from localai_memory.notes.models import ChangeSet, FileChange, FileVersion

    report: dict[str, Any] = {}
    lost: list[str] = []
    duplicated: list[str] = []
    error_but_saved: list[str] = []

    # -- note edits: each text is unique, so it is in exactly one version when acknowledged --------------
    versions: Counter[str] = Counter()
    where: dict[str, tuple[int, str, int]] = {}
    for owner, path, version, content in (FileVersion.objects.filter(content__startswith="Edited by hand, edit ")
                                          .values_list("owner_id", "path", "version", "content").iterator()):
        match = EDIT.search(content)
        if match:
            versions[match.group(1)] += 1
            where[match.group(1)] = (owner, path, version)
    outcome: Counter[str] = Counter()
    for number, path, _read, token, status, saved_version in ledger["edits"]:
        owner = numbers_to_ids[number]
        count = versions.get(token, 0)
        if status == 200:
            outcome["acknowledged"] += 1
            if count == 0 or where[token] != (owner, path, saved_version):
                lost.append(f"edit {token} of {path} (acknowledged as v{saved_version})")
        elif isinstance(status, int) and 400 <= status < 500:
            outcome[f"refused_{status}"] += 1
            if count:
                error_but_saved.append(f"edit {token} answered {status} but saved")
        else:
            outcome[f"failed_{status}"] += 1
            if count:
                error_but_saved.append(f"edit {token} answered {status} but saved")
        if count > 1:
            duplicated.append(f"edit {token} saved {count} times")
    report["edits"] = dict(outcome)

    # -- confirms: a 200 means confirmed with exactly the change set it named ---------------------------
    confirmed_ids = {row[1] for row in ledger["confirms"] if row[2] == 200}
    touched = {row[1] for row in ledger["confirms"]} | {row[1] for row in ledger["rejects"]}
    states = dict(Proposal.objects.filter(pk__in=touched).values_list("pk", "status"))
    proposal_changes = dict(Proposal.objects.filter(pk__in=touched).values_list("pk", "change_set_id"))
    saved_for: defaultdict[int, list[int]] = defaultdict(list)
    for change_id, proposal_id in ChangeSet.objects.filter(proposal_id__in=touched, source="proposal") \
            .values_list("pk", "proposal_id"):
        saved_for[proposal_id].append(change_id)
    outcome = Counter()
    for number, proposal_id, status, change_id, _attempt in ledger["confirms"]:
        outcome[str(status)] += 1
        if status == 200 and (states.get(proposal_id) != "confirmed"
                              or (change_id is not None and proposal_changes.get(proposal_id) != change_id)):
            lost.append(f"proposal {proposal_id} confirmed (200) but it is {states.get(proposal_id)}")
    for proposal_id in touched:
        if len(saved_for.get(proposal_id, [])) > 1:
            duplicated.append(f"proposal {proposal_id} saved {len(saved_for[proposal_id])} times")
        if states.get(proposal_id) != "confirmed" and saved_for.get(proposal_id):
            lost.append(f"proposal {proposal_id} is {states.get(proposal_id)} but a change set saved it")
    failed_only = {row[1] for row in ledger["confirms"] if row[2] not in (200,)} - confirmed_ids
    for proposal_id in failed_only:
        answers = {row[2] for row in ledger["confirms"] if row[1] == proposal_id}
        # (a later 409 told the person it was saved: that is not misleading)
        if states.get(proposal_id) == "confirmed" and answers & {"conn", 503, 500, 502, 504} and 409 not in answers:
            error_but_saved.append(f"proposal {proposal_id} answered {sorted(map(str, answers))} but saved")
    report["confirms"] = dict(outcome)
    report["confirmed_proposals"] = len(confirmed_ids)
    outcome = Counter()
    for _number, proposal_id, status in ledger["rejects"]:
        outcome[str(status)] += 1
        if status == 200 and states.get(proposal_id) != "rejected":
            lost.append(f"proposal {proposal_id} rejected (200) but it is {states.get(proposal_id)}")
    report["rejects"] = dict(outcome)

    # -- notes the model proposed or saved at once, and their Undo --------------------------------------
    proposed = {row[2]: row[1] for row in ledger["proposed"]}
    have = dict(Proposal.objects.filter(pk__in=list(proposed.values())).values_list("pk", "summary"))
    for token, proposal_id in proposed.items():
        if proposed_summary(token) != have.get(proposal_id):
            lost.append(f"proposal {proposal_id} ({token}) made in a turn is missing")
    report["proposed_in_turns"] = len(proposed)
    saved = {row[1]: row[2] for row in ledger["saved"]}
    afters = defaultdict(list)
    for change_id, after in FileChange.objects.filter(change_set_id__in=list(saved), path__endswith="index.md") \
            .values_list("change_set_id", "after"):
        afters[change_id].append(after or "")
    for change_id, token in saved.items():
        if not any(f"Note {token}" in after for after in afters.get(change_id, [])):
            lost.append(f"note {token} saved at once (change {change_id}) is not in its change set")
    report["saved_in_turns"] = len(saved)
    undone = [row for row in ledger["undos"] if row[2] == 200]
    reverts = Counter(ChangeSet.objects.filter(reverts_id__in=[row[1] for row in ledger["undos"]])
                      .values_list("reverts_id", flat=True))
    for _number, change_id, _status, undo_id in undone:
        if not ChangeSet.objects.filter(pk=undo_id, reverts_id=change_id).exists():
            lost.append(f"undo of change {change_id} acknowledged but missing")
    for change_id, count in reverts.items():
        if count > 1:
            duplicated.append(f"change {change_id} undone {count} times")
    report["undos"] = dict(Counter(str(row[2]) for row in ledger["undos"]))

    report["lost"] = lost
    report["duplicated"] = duplicated
    report["error_but_saved"] = error_but_saved
    return report


def print_verification(report: dict[str, Any], out=print) -> None:
    out(f"  note edits: {report['edits']}")
    out(f"  confirms: {report['confirms']} ({report['confirmed_proposals']} proposals confirmed); "
        f"rejects: {report['rejects']}")
    out(f"  made in turns: {report['proposed_in_turns']} proposals, {report['saved_in_turns']} notes saved at "
        f"once; undos: {report['undos']}")
    out(f"  LOST: {len(report['lost'])}   DUPLICATED: {len(report['duplicated'])}   "
        f"answered with an error but saved: {len(report['error_but_saved'])}")
    for line in (report["lost"] + report["duplicated"] + report["error_but_saved"])[:20]:
        out(f"    - {line}")
