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


@pytest.mark.parametrize(("line", "proposed"), [
    ("kaffee: Ich trinke morgens Kaffee mit Milch", "kaffee: Ich trinke morgens keinen Kaffee mit Milch"),
    ("fleisch: isst gerne Fleisch zum Abendessen", "fleisch: isst nicht gerne Fleisch zum Abendessen"),
    ("café: boit du café le matin avec du lait", "café: ne boit pas du café le matin avec du lait"),
    ("café: toma café por la mañana con leche", "café: nunca toma café por la mañana con leche"),
    ("caffè: beve caffè la mattina con latte", "caffè: non beve caffè la mattina con latte"),
    ("café: bebe café de manhã com leite", "café: não bebe café de manhã com leite"),
])
def test_a_negated_fact_in_another_language_is_not_a_duplicate(now: datetime, line: str, proposed: str) -> None:
    assert is_duplicate(proposed, existing(None, now, line)) is None


def test_a_negated_german_fact_is_not_a_duplicate_by_meaning_either(ondevice: OnDeviceEmbedder,
                                                                    now: datetime) -> None:
    assert check(ondevice, now, "kaffee: trinkt morgens keinen Kaffee mit Milch",
                 "kaffee: trinkt morgens Kaffee mit Milch") is None


def test_other_emoji_with_the_same_words_are_another_fact(now: datetime) -> None:
    assert is_duplicate("My favourite animal: 🐱", existing(None, now, "My favourite animal: 🐶")) is None
    assert is_duplicate("Family: 👨‍👩‍👧", existing(None, now, "Family: 👨‍👩‍👦")) is None


def test_the_same_words_and_the_same_emoji_are_still_a_duplicate(now: datetime) -> None:
    match = is_duplicate("my favourite animal: 🐶!", existing(None, now, "My favourite animal: 🐶"))
    assert match is not None and match.by == "exact"
