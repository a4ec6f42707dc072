"""A note's kind and the names it mentions, read from its words (``memory.categories``)."""

from __future__ import annotations

import pytest

from localai_memory.memory.categories import ProfileNote, category_of, names_in, profile


@pytest.mark.parametrize(("summary", "details", "kind"), [
    ("wifi", "the password is hunter22", "credential"),
    ("decided to move to Lisbon next year", "", "decision"),
    ("Hat entschieden, nach Wien zu ziehen", "", "decision"),
    ("Prefers metric units", "", "preference"),
    ("allergic to peanuts", "", "preference"),
    ("mag keinen Kaffee", "", "preference"),
    ("Ich wohne in Berlin", "", "identity"),
    ("Ich spreche Italienisch", "", "skill"),
    ("speaks Spanish and Portuguese", "", "skill"),
    ("building a Rust CLI called Ferris", "", "project"),
    ("lives in Rome", "", "identity"),
    ("brother Marco works at Fiat", "", "identity"),
    ("Tokyo in October", "", "fact"),
    ("garden", "Tomatoes by the south wall.", "fact"),
])
def test_a_note_has_the_first_kind_its_words_fit(summary, details, kind):
    assert category_of(summary, details) == kind


@pytest.mark.parametrize(("text", "names"), [
    ("lives in Rome", ["Rome"]),
    ("Tokyo trip in October", ["Tokyo"]),
    ("Likes tea. Has a cat named Mia.", ["Mia"]),
    ("works at Acme Corp with Jean de La Fontaine", ["Acme Corp", "Jean de La Fontaine"]),
    ("I am a nurse. The hospital is St Mary's in London.", ["St Mary's", "London"]),
    ("Decided to visit Japan", ["Japan"]),
    ("# Trip\nVisiting Anna in Lyon\nLyon again", ["Anna", "Lyon", "Lyon"]),
])
def test_names_are_capitalised_words_past_a_common_first_word(text, names):
    assert names_in(text) == names


def test_a_profile_lists_every_kind_and_the_names_most_mentioned_first():
    made = profile([ProfileNote("user", "brother", "brother Marco lives in Turin"),
                    ProfileNote("user", "trip", "visiting marco in Turin in May"),
                    ProfileNote("agent:3", "diet", "prefers vegan food")])
    assert made.categories["identity"] == [{"scope": "user", "topic": "brother",
                                               "summary": "brother Marco lives in Turin"}]
    assert made.categories["preference"][0]["scope"] == "agent:3" and made.categories["skill"] == []
    assert made.entities == [{"name": "Turin", "notes": 2, "topics": ["brother", "trip"]},
                                {"name": "Marco", "notes": 1, "topics": ["brother"]}]
