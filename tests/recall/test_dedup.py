"""A proposed note that says what an existing line says is a duplicate; a changed fact never is."""

from __future__ import annotations

from datetime import datetime

import pytest

from localai_memory.recall.embedders import OnDeviceEmbedder
from localai_memory.recall.ranking import Candidate, is_duplicate


def existing(ondevice: OnDeviceEmbedder | None, now: datetime, *lines: str) -> list[Candidate]:
    vectors = ondevice.embed(list(lines)) if ondevice else [None] * len(lines)
    return [Candidate(id=i, text=line, updated_at=now, vectors=v,
                      model_id=ondevice.model_id if ondevice else None) for i, (line, v) in
            enumerate(zip(lines, vectors, strict=True))]


def check(ondevice: OnDeviceEmbedder, now: datetime, proposed: str, *lines: str):
    return is_duplicate(proposed, existing(ondevice, now, *lines), new_vector=ondevice.embed([proposed])[0],
                        model_id=ondevice.model_id)


def test_a_reworded_note_is_reported_as_a_duplicate_of_the_line_it_repeats(ondevice: OnDeviceEmbedder,
                                                                           now: datetime) -> None:
    match = check(ondevice, now, "cat: owns a gray cat called Pixel",
                  "work: backend engineer at Finlytics", "cat: has a grey cat named Pixel")
    assert match is not None
    assert match.id == 1 and match.by == "semantic"
    assert match.similarity >= 0.84


@pytest.mark.parametrize(("line", "proposed"), [
    ("home: lives in Rome", "home: lives in Paris"),
    ("diet: vegetarian", "diet: vegan"),
    ("lifting: deadlift best is 140 kg", "lifting: deadlift best is 150 kg"),
    ("heart: takes blood thinners", "heart: no longer takes blood thinners"),
    ("choir: sings bass in the community choir", "choir: sings tenor in the church choir"),
])
def test_a_changed_fact_is_not_a_duplicate(ondevice: OnDeviceEmbedder, now: datetime, line: str,
                                           proposed: str) -> None:
    assert check(ondevice, now, proposed, line) is None


def test_the_same_words_are_a_duplicate_even_without_vectors(now: datetime) -> None:
    match = is_duplicate("Cat: has a grey cat named Pixel.", existing(None, now, "cat: has a grey cat named Pixel"))
    assert match is not None and match.by == "exact"


def test_without_vectors_a_near_copy_is_caught_by_its_words(now: datetime) -> None:
    match = is_duplicate("guitar: learning acoustic guitar fingerpicking",
                         existing(None, now, "guitar: learning acoustic guitar and fingerpicking"))
    assert match is not None and match.by == "lexical"
