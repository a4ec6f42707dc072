"""Recall quality benchmark: hit@1, hit@3 and off-topic false injection for each available provider.

    .venv/bin/python bench/recall/run.py            # the shipped configuration, every provider here
    .venv/bin/python bench/recall/run.py --sweep    # grid-search the cosine gate on the tune half only

Providers: ``ondevice`` (all-MiniLM-L6-v2 int8, in process), ``lexical`` (no vectors: PostgreSQL full
text, what recall does with ``no_embedder``; it starts an embedded PostgreSQL of its own, see
``postgres_lexical_scores``) and ``endpoint`` (an OpenAI-compatible server, only when
``EMBEDDINGS_BASE_URL`` is set; ``EMBEDDINGS_MODEL`` names its model).

The set (recall_set.json) is split by position: even positions of each list are the tune half (used to
pick thresholds), odd positions the held-out half. Figures are printed for both halves and overall.
A query hits@k when one of its expected topics is among the first k notes that pass the relevance gate
(nothing passing is a miss); an off-topic message is a false injection when any note passes the gate.
Every figure goes through ``localai_memory.recall.ranking.rank_notes``, the function recall ships with.
With an embedder it also prints the long-files probe (``long_files_probe``): every topic file made long, so
its facts start past the model's 128 tokens, embedded as one passage and as the app's parts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from localai_memory.recall.embedders import Embedder, OnDeviceEmbedder, OpenAIEmbedder
from localai_memory.recall.ranking import (
    DEFAULT_CONFIG,
    KNOWN_GATES,
    Candidate,
    DegradeReason,
    RecallConfig,
    RecallQuery,
    SemanticGate,
    content_terms,
    gate_for,
    importance_of,
    is_personal,
    passage_text,
    rank_notes,
)
from localai_memory.recall.ranking import (
    note_passages as note_passages_for,
)

SET_PATH = Path(__file__).with_name("recall_set.json")


@dataclass
class Case:
    user: str
    query: RecallQuery
    expect: frozenset[str]  # topics; empty for off-topic
    half: str  # "tune" | "held"
    paraphrase: bool  # shares no content word with any expected note


def note_text(note: dict) -> str:
    line = f"{note['topic']}: {note['summary']}"
    return f"{line}\n{note['details']}" if note.get("details") else line


def note_passages(note: dict) -> list[str]:
    """What the app embeds for a note: see ``localai_memory.recall.ranking.note_passages``."""
    return note_passages_for(note["topic"], note["summary"], note.get("details", ""))


def load_set(path: Path = SET_PATH) -> tuple[dict, list[Case]]:
    data = json.loads(path.read_text())
    cases: list[Case] = []
    for user in data["users"]:
        notes = {n["topic"]: n for n in user["notes"]}
        for position, q in enumerate(user["queries"]):
            query = RecallQuery(text=q["text"], context=tuple(q.get("context", ())))
            shared = set(content_terms(q["text"])) & set().union(
                *(content_terms(note_text(notes[t])) for t in q["expect"]))
            cases.append(Case(user["id"], query, frozenset(q["expect"]), "tune" if position % 2 == 0 else "held",
                              paraphrase=not shared and not q.get("context")))
        for position, text in enumerate(user["offtopic"]):
            cases.append(Case(user["id"], RecallQuery(text=text), frozenset(),
                              "tune" if position % 2 == 0 else "held", False))
        for position, text in enumerate(data["offtopic_all"]):
            cases.append(Case(user["id"], RecallQuery(text=text), frozenset(),
                              "tune" if position % 2 == 0 else "held", False))
    return data, cases


@dataclass
class Prepared:
    """Candidates per user and query vectors per case, embedded once per provider."""

    name: str
    model_id: str | None
    candidates: dict[str, list[Candidate]]
    query_vectors: list[Any]
    embed_ms: list[float]  # one user message, end to end
    notes_seconds: float
    note_count: int
    lexical: list[dict[str, float]] | None = None  # per case, topic -> PostgreSQL full-text rank


def prepare(name: str, embedder: Embedder | None, data: dict, cases: list[Case]) -> Prepared:
    now = datetime.fromisoformat(data["now"])
    candidates: dict[str, list[Candidate]] = {}
    started = time.perf_counter()
    note_count = 0
    for user in data["users"]:
        rows = []
        for note in user["notes"]:
            note_count += 1
            vectors = embedder.embed(note_passages(note)) if embedder else None
            rows.append(Candidate(
                id=note["topic"], text=note_text(note), updated_at=now - timedelta(days=note["age_days"]),
                scope="user", source=note["source"], importance=importance_of(note["source"]), vectors=vectors,
                model_id=embedder.model_id if embedder else None,
            ))
        candidates[user["id"]] = rows
    notes_seconds = time.perf_counter() - started
    query_vectors: list[Any] = []
    embed_ms: list[float] = []
    for case in cases:
        if embedder is None:
            query_vectors.append(None)
            continue
        t0 = time.perf_counter()
        query_vectors.append(embedder.embed(case.query.texts_to_embed()))
        embed_ms.append((time.perf_counter() - t0) * 1000)
    return Prepared(name, embedder.model_id if embedder else None, candidates, query_vectors, embed_ms,
                    notes_seconds, note_count)


def postgres_lexical_scores(data: dict, cases: list[Case]) -> list[dict[str, float]]:
    """Each case's full-text rank per topic, from PostgreSQL through ``recall.service.lexical_scores`` (the
    query recall runs with ``no_embedder``), over recall rows of the set's notes (index line and each part of
    the topic file, as ``recall.index`` stores them), made one rank per note by ``service.lexical_rank``.

    Uses an embedded PostgreSQL of its own under ``.localai/bench-recall-quality``
    (``LOCALAI_MEMORY_DATA_DIR``), started as the app starts it, never ``DATABASE_URL``; the set's five users
    (``recallset-<id>``) and their rows are written again on every run.
    """
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("LOCALAI_MEMORY_DATA_DIR", str(ROOT / ".localai" / "bench-recall-quality"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from localai_memory.notes.paths import Scope
    from localai_memory.recall import service
    from localai_memory.recall.models import DETAILS, LINE, NoteVector
    from localai_memory.recall.ranking import details_parts

    call_command("migrate", verbosity=0)
    now = datetime.fromisoformat(data["now"])
    owners = {}
    for user in data["users"]:
        owner, _ = get_user_model().objects.get_or_create(username=f"recallset-{user['id']}",
                                                          defaults={"password": "!"})
        owners[user["id"]] = owner.pk
        NoteVector.objects.filter(owner=owner).delete()
        rows = []
        for note in user["notes"]:
            base = {"owner": owner, "scope_kind": "user", "scope_key": "", "topic": note["topic"],
                    "source": note["source"], "updated_at": now - timedelta(days=note["age_days"])}
            rows.append(NoteVector(kind=LINE, path="Memory/index.md", text=note["summary"], **base))
            if note.get("details", "").strip():
                rows += [NoteVector(kind=DETAILS, part=part, path=f"Memory/{note['topic']}.md", text=text, **base)
                         for part, text in enumerate(details_parts(note["details"]))]
        NoteVector.objects.bulk_create(rows)
    scores = []
    for case in cases:
        found = service.lexical_scores(owner_id=owners[case.user], scopes=[Scope.user()], query=case.query)
        scores.append({topic: service.lexical_rank(ranks) for (_, _, topic), ranks in found.items()})
    return scores


def evaluate(prepared: Prepared, data: dict, cases: list[Case], config: RecallConfig,
             half: str | None = None) -> dict[str, float]:
    now = datetime.fromisoformat(data["now"])
    hit1 = hit3 = on = off = injected = para = para_hit1 = 0
    for n, (case, vectors) in enumerate(zip(cases, prepared.query_vectors, strict=True)):
        if half and case.half != half:
            continue
        candidates = prepared.candidates[case.user]
        if prepared.lexical is not None:  # ranked by PostgreSQL full text, as recall ranks without vectors
            candidates = [replace(c, lexical=prepared.lexical[n].get(c.id, 0.0)) for c in candidates]
        result = rank_notes(
            candidates, query=case.query, now=now, query_vectors=vectors,
            query_model_id=prepared.model_id,
            degrade_reason=None if vectors is not None else DegradeReason.NO_EMBEDDER, config=config,
        )
        ids = result.ids
        if not case.expect:
            off += 1
            injected += bool(ids)
            continue
        on += 1
        first = bool(ids) and ids[0] in case.expect
        hit1 += first
        hit3 += any(i in case.expect for i in ids[:3])
        if case.paraphrase:
            para += 1
            para_hit1 += first
    return {"hit@1": hit1 / on, "hit@3": hit3 / on, "false_injection": injected / off if off else 0.0,
            "queries": on, "offtopic": off, "paraphrase_hit@1": para_hit1 / para if para else 0.0,
            "paraphrases": para}


def providers(only: list[str] | None) -> list[tuple[str, Embedder | None]]:
    chosen: list[tuple[str, Embedder | None]] = []
    if OnDeviceEmbedder.available():
        chosen.append(("ondevice", OnDeviceEmbedder()))
    chosen.append(("lexical", None))
    base_url = os.environ.get("EMBEDDINGS_BASE_URL")
    if base_url:
        model = os.environ.get("EMBEDDINGS_MODEL", "all-minilm-l6-v2")
        chosen.append(("endpoint", OpenAIEmbedder(base_url, model, os.environ.get("EMBEDDINGS_API_KEY"))))
    return [p for p in chosen if not only or p[0] in only]


def line(name: str, half: str, m: dict[str, float]) -> str:
    return (f"{name:<10} {half:<5} hit@1 {m['hit@1']:.3f}  hit@3 {m['hit@3']:.3f}  "
            f"off-topic injected {m['false_injection'] * 100:5.1f}%  "
            f"(paraphrase-only hit@1 {m['paraphrase_hit@1']:.3f} of {m['paraphrases']}; "
            f"{m['queries']} queries, {m['offtopic']} off-topic)")


def sweep(prepared: Prepared, data: dict, cases: list[Case], base: RecallConfig,
          max_injection: float = 0.03) -> RecallConfig:
    """Grid-search the gate on the tune half only; print the frontier with held-out figures beside it.

    The rule that picks the shipped gate: among gates whose tune-half false injection is at most
    ``max_injection`` (3 %: a margin under the 5 % target, since the tune half has only ~70 off-topic
    messages) and whose tune-half hit@1 is within one point of the best such gate, the strictest one;
    then ``with_overlap`` is capped at ``personal``: a shared content word is at least as much evidence as
    speaking in the first person, and the set has too few such messages to place that bar itself (any
    value over a wide range scores the same), while one-word searches need it (``keyword_probe``).
    Ordering mirrors ``rank_notes`` (same blend, same relevance span).
    """
    import numpy as np

    now = datetime.fromisoformat(data["now"])
    w = base.weights
    rows = []
    off_max = []
    for case, vectors in zip(cases, prepared.query_vectors, strict=True):
        loose = replace(base, gate=SemanticGate(-1.0, -1.0, -1.0), max_items=10_000)
        result = rank_notes(prepared.candidates[case.user], query=case.query, now=now, query_vectors=vectors,
                            query_model_id=prepared.model_id, config=loose)
        items = result.items
        cos = np.array([i.cosine for i in items], dtype=float)
        rows.append((case, cos, np.array([i.matched_by == "both" for i in items]), is_personal(case.query),
                     np.array([w.recency * i.recency + w.importance * i.importance for i in items]),
                     [i.id for i in items]))
        if not case.expect:
            off_max.append(cos.max())
    lo, hi = float(np.percentile(off_max, 10)), float(max(off_max)) + 0.1
    steps = np.round(np.arange(lo, hi, 0.01), 3)

    def score(gate: SemanticGate, half: str) -> tuple[float, float, float]:
        h1 = h3 = on = off = inj = 0
        for case, cos, shares, personal, rest, ids in rows:
            if case.half != half:
                continue
            ok = (cos >= gate.alone) | (shares & (cos >= gate.with_overlap)) | ((cos >= gate.personal) & personal)
            if ok.any():
                top = cos[ok].max()
                rel = np.clip(1 - (top - cos) / max(base.relevance_span, 1e-6), 0, 1)
                order = [ids[i] for i in np.lexsort((-cos, -(w.relevance * rel + rest))) if ok[i]]
            else:
                order = []
            if not case.expect:
                off += 1
                inj += bool(order)
                continue
            on += 1
            h1 += bool(order) and order[0] in case.expect
            h3 += any(i in case.expect for i in order[:3])
        return h1 / on, h3 / on, inj / off

    results = []
    for alone in steps:
        for with_overlap in steps[steps <= alone]:
            for personal in steps[steps <= alone]:
                gate = SemanticGate(float(alone), float(with_overlap), float(personal))
                results.append((score(gate, "tune"), gate))
    print(f"swept {len(results)} gates on the tune half ({prepared.name}); the frontier:")
    chosen = None
    for limit in (0.02, 0.03, 0.05):
        ok = [r for r in results if r[0][2] <= limit]
        best_hit = max(r[0][0] for r in ok)
        # Among gates within one point of the best hit@1, the strictest: a false injection puts an
        # unrelated private note in front of the model, a miss only costs the model a context_read.
        near = [r for r in ok if r[0][0] >= best_hit - 0.01]
        (t1, _t3, ti), gate = max(near, key=lambda r: (r[1].alone + r[1].with_overlap + r[1].personal,
                                                       r[0][0], r[0][1]))
        h1, h3, hi_ = score(gate, "held")
        print(f"  tune injection <= {limit:.0%}: {gate}  tune hit@1 {t1:.3f} inj {ti:.1%} | "
              f"held hit@1 {h1:.3f} hit@3 {h3:.3f} inj {hi_:.1%}")
        if limit == max_injection:
            chosen = gate
    assert chosen is not None
    print(f"chosen (tune injection <= {max_injection:.0%}): {chosen}")
    if chosen.with_overlap > chosen.personal:
        chosen = replace(chosen, with_overlap=chosen.personal)
        (t1, _t3, ti), (h1, _h3, hi_) = score(chosen, "tune"), score(chosen, "held")
        print(f"with_overlap capped at personal: {chosen}  tune hit@1 {t1:.3f} inj {ti:.1%} | "
              f"held hit@1 {h1:.3f} inj {hi_:.1%}")
    return replace(base, gate=chosen)


def keyword_probe(prepared: Prepared, embedder: Embedder, data: dict, config: RecallConfig) -> tuple[int, int]:
    """One-word searches: each capitalised word of 4+ letters in a note ("Trastevere", "EpiPen") as the whole
    query; how many of them bring in their note, of how many. Such a query carries little meaning for the
    model, so it passes mostly through the shared-word bar (``SemanticGate.with_overlap``)."""
    import re

    now = datetime.fromisoformat(data["now"])
    found = total = 0
    for user in data["users"]:
        for note in user["notes"]:
            for word in sorted(set(re.findall(r"\b[A-Z][A-Za-z]{3,}\b", note_text(note)))):
                result = rank_notes(prepared.candidates[user["id"]], query=word, now=now,
                                    query_vectors=embedder.embed([word]), query_model_id=prepared.model_id,
                                    config=config)
                total += 1
                found += note["topic"] in result.ids
    return found, total


#: What the long-files probe puts before every topic file's own text: ~110 words about nobody in particular, so
#: the note's facts start past the first 128 tokens the on-device model reads of a passage.
FILLER = (
    "This page came over from an older notebook app, where it sat in a folder with other pages of the same "
    "kind. The app kept every page as plain text, one paragraph after another, with the newest edits at the "
    "bottom and no headings. When the pages were moved here, spelling was left as it was and nothing was "
    "summarised, so some paragraphs repeat what others already say, and a few are out of date.\n\n"
    "The part below is what the page says now. Older versions of the page are kept in the history of the "
    "file, and can be restored from there at any time if something was lost in the move or written over by "
    "mistake later on."
)


def long_files_probe(prepared: Prepared, embedder: Embedder, data: dict, cases: list[Case],
                     config: RecallConfig) -> dict[str, dict[str, float]]:
    """Every topic file made long (``FILLER`` before its own text), embedded as one passage, as recall did
    before (the model reads its first 128 tokens), and as the app embeds it now (``ranking.note_passages``:
    one passage per part). Figures over all queries, as ``evaluate`` gives them."""
    now = datetime.fromisoformat(data["now"])
    figures = {}
    for name in ("one passage", "parts"):
        candidates: dict[str, list[Candidate]] = {}
        for user in data["users"]:
            rows = []
            for note in user["notes"]:
                details = f"{FILLER}\n\n{note['details']}" if note.get("details") else ""
                if name == "parts":
                    passages = note_passages_for(note["topic"], note["summary"], details)
                else:
                    passages = [passage_text(note["topic"], text) for text in (note["summary"], details) if text]
                rows.append(Candidate(
                    id=note["topic"], text=f"{note['topic']}: {note['summary']}\n{details}",
                    updated_at=now - timedelta(days=note["age_days"]), scope="user", source=note["source"],
                    importance=importance_of(note["source"]), vectors=embedder.embed(passages),
                    model_id=embedder.model_id))
            candidates[user["id"]] = rows
        figures[name] = evaluate(replace(prepared, candidates=candidates), data, cases, config)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="store_true", help="tune the cosine gate on the tune half")
    parser.add_argument("--provider", action="append", help="ondevice, lexical or endpoint (default: all)")
    args = parser.parse_args()
    data, cases = load_set()
    n_notes = sum(len(u["notes"]) for u in data["users"])
    print(f"recall set: {n_notes} notes, {len(data['users'])} users, "
          f"{sum(1 for c in cases if c.expect)} queries, {sum(1 for c in cases if not c.expect)} off-topic")
    for name, embedder in providers(args.provider):
        prepared = prepare(name, embedder, data, cases)
        if embedder is None:
            prepared.lexical = postgres_lexical_scores(data, cases)
        config = DEFAULT_CONFIG
        known = prepared.model_id is not None and (prepared.model_id in KNOWN_GATES
                                                   or "minilm-l6" in prepared.model_id.lower())
        if embedder is not None and (args.sweep or not known):
            if not known:
                print(f"{prepared.model_id} has no measured gate: calibrating one on the tune half")
            config = sweep(prepared, data, cases, config)
        gate = config.gate or gate_for(prepared.model_id)
        header = f"== {name}" + (f" ({prepared.model_id}; gate: alone ≥ {gate.alone}, sharing a word ≥ "
                                 f"{gate.with_overlap}, personal ≥ {gate.personal})" if embedder else " (PostgreSQL full text)")
        print(header)
        for half in ("tune", "held", None):
            print(line(name, half or "all", evaluate(prepared, data, cases, config, half)))
        if embedder is not None:
            for how, m in long_files_probe(prepared, embedder, data, cases, config).items():
                print(f"{name:<10} long files embedded as {how}: hit@1 {m['hit@1']:.3f}  hit@3 {m['hit@3']:.3f}  "
                      f"off-topic injected {m['false_injection'] * 100:5.1f}%  "
                      f"(paraphrase-only hit@1 {m['paraphrase_hit@1']:.3f})")
            found, total = keyword_probe(prepared, embedder, data, config)
            print(f"{name:<10} one-word searches (a capitalised word of a note): {found}/{total} "
                  f"({found / total:.0%}) bring in their note")
            ms = []
            for case in cases[:200] * 2:  # one user message at a time, as a turn embeds it
                t0 = time.perf_counter()
                embedder.embed([case.query.text])
                ms.append((time.perf_counter() - t0) * 1000)
            ms = sorted(ms[len(ms) // 2:])  # the second pass: warm
            turn = sorted(prepared.embed_ms)
            print(f"{name:<10} embed one message: p50 {statistics.median(ms):.1f} ms, "
                  f"p95 {ms[int(len(ms) * 0.95)]:.1f} ms; a turn's query (with context: 2 texts) p50 "
                  f"{statistics.median(turn):.1f} ms; {prepared.note_count} notes "
                  f"({sum(len(note_passages(n)) for u in data['users'] for n in u['notes'])} passages) "
                  f"in {prepared.notes_seconds:.2f} s")


if __name__ == "__main__":
    main()
