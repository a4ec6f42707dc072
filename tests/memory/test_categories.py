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
    ("Trinkt morgens Kaffee mit Milch", "", "preference"),
    ("Isst gerne Fisch", "", "preference"),
    ("Allergisch gegen Nüsse", "", "preference"),
    ("Lernt Japanisch", "", "skill"),
    ("Lebt in Hamburg", "", "identity"),
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


@pytest.mark.parametrize(("text", "names"), [
    ("Trinkt morgens Kaffee mit Milch", []),
    ("Isst gerne Fisch und Käse", []),
    ("Allergisch gegen Nüsse", []),
    ("Fährt Fahrrad zur Arbeit", []),
    ("Habite à Paris avec Marie", ["Paris", "Marie"]),
    ("Sein Bruder heißt Marco und wohnt in Turin", ["Marco", "Turin"]),
    ("Arbeitet bei SAP in München", ["SAP", "München"]),
])
def test_in_german_and_french_notes_nouns_and_first_verbs_are_no_names(text, names):
    assert names_in(text) == names


def test_a_profile_of_german_notes_names_places_and_people_not_coffee_and_milk():
    made = profile([ProfileNote("user", "kaffee", "Trinkt morgens Kaffee mit Milch"),
                    ProfileNote("user", "essen", "Isst gerne Fisch und Käse"),
                    ProfileNote("user", "allergie", "Allergisch gegen Nüsse"),
                    ProfileNote("user", "wohnort", "Wohnt in Berlin mit Anna"),
                    ProfileNote("user", "urlaub", "Anna fährt im Sommer nach Wien"),
                    ProfileNote("user", "paris", "Habite à Paris")])
    assert [e["name"] for e in made.entities] == ["Anna", "Berlin", "Paris", "Wien"]
    assert made.entities[0] == {"name": "Anna", "notes": 2, "topics": ["wohnort", "urlaub"]}
    assert [n["topic"] for n in made.categories["preference"]] == ["kaffee", "essen", "allergie"]


def test_a_capitalised_first_word_of_a_german_note_is_a_name_when_other_notes_write_it_so_too():
    made = profile([ProfileNote("user", "bruder", "Marco wohnt in Turin"),
                    ProfileNote("user", "reise", "Besuch bei Marco im Mai")])
    assert made.entities[0] == {"name": "Marco", "notes": 2, "topics": ["bruder", "reise"]}
