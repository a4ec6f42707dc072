"""Duplicate-check benchmark: does ``is_duplicate`` catch rewordings and keep changed facts?

    .venv/bin/python bench/recall/dedup.py          # the shipped thresholds
    .venv/bin/python bench/recall/dedup.py --sweep  # pick the cosine threshold on the tune half

dedup_set.json holds (existing line, proposed line, duplicate?) pairs: 30 rewordings of one fact and 30
same-topic lines whose fact changed (Rome → Paris, 140 → 150 kg, "takes" → "no longer takes"). A missed
duplicate costs a redundant index line; a false duplicate would drop an update, so the threshold is the
lowest one with no false duplicate on the tune half. Printed for on-device vectors and lexically.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from localai_memory.recall.embedders import OnDeviceEmbedder
from localai_memory.recall.ranking import DUPLICATE_COSINE, Candidate, is_duplicate, passage_text

SET_PATH = Path(__file__).with_name("dedup_set.json")


def embedded(line: str) -> str:
    """What the app embeds for an index line ``"topic: summary"`` (``recall.index.passage``)."""
    topic, _, summary = line.partition(": ")
    return passage_text(topic, summary) if summary else line


def load() -> list[dict]:
    pairs = json.loads(SET_PATH.read_text())["pairs"]
    for group in (True, False):
        for position, pair in enumerate(p for p in pairs if p["duplicate"] is group):
            pair["half"] = "tune" if position % 2 == 0 else "held"
    return pairs


def measure(pairs: list[dict], embedder: OnDeviceEmbedder | None, threshold: float,
            half: str | None) -> tuple[int, int, int, int]:
    """(duplicates caught, duplicates, changed facts called duplicates, changed facts)."""
    now = datetime.now(UTC)
    caught = dups = false_dups = keeps = 0
    for pair in pairs:
        if half and pair["half"] != half:
            continue
        vectors = embedder.embed([embedded(pair["existing"]), embedded(pair["proposed"])]) if embedder else None
        existing = Candidate(id=1, text=pair["existing"], updated_at=now,
                             vectors=None if vectors is None else vectors[0],
                             model_id=embedder.model_id if embedder else None)
        match = is_duplicate(pair["proposed"], [existing], new_vector=None if vectors is None else vectors[1],
                             model_id=embedder.model_id if embedder else None, cosine_threshold=threshold)
        if pair["duplicate"]:
            dups += 1
            caught += match is not None
        else:
            keeps += 1
            false_dups += match is not None
    return caught, dups, false_dups, keeps


def describe(figures: tuple[int, int, int, int]) -> str:
    caught, dups, false_dups, keeps = figures
    return (f"duplicates caught {caught}/{dups} ({caught / dups:.0%}), changed facts wrongly called "
            f"duplicates {false_dups}/{keeps}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    pairs = load()
    embedder = OnDeviceEmbedder()
    threshold = DUPLICATE_COSINE
    if args.sweep:
        cosines = []
        for pair in pairs:
            v = embedder.embed([embedded(pair["existing"]), embedded(pair["proposed"])])
            cosines.append((float(v[0] @ v[1]), pair["duplicate"], pair["half"], pair["proposed"]))
        for cos, dup, half, text in sorted(cosines):
            print(f"  {cos:.3f} {'DUP ' if dup else 'keep'} {half} {text}")
        # The lowest threshold with no false duplicate on the tune half (guards included).
        for candidate in sorted({round(c[0], 2) for c in cosines}):
            if measure(pairs, embedder, candidate, "tune")[2] == 0:
                threshold = candidate
                break
        print(f"chosen cosine threshold: {threshold}")
    print(f"cosine threshold {threshold}")
    for half in ("tune", "held", None):
        print(f"  on-device {half or 'all':<4}: {describe(measure(pairs, embedder, threshold, half))}")
        print(f"  lexical   {half or 'all':<4}: {describe(measure(pairs, None, threshold, half))}")


if __name__ == "__main__":
    main()
