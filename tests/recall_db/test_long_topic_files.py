"""A long topic file is recalled by any of its parts: the embedder reads only a text's first 128 tokens, so
recall stores a file of more than ~80 words as several passages and ranks the note by its best one. A fact
in the last paragraph of a long note, or an old line of ``recent-chats``, is found by meaning and by words;
the turn shows the part that matched; the parts follow every write; a note is still one result."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from django.apps import apps

from localai_memory.core.invariants import check_invariants
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import file_write
from localai_memory.recall import index, service
from localai_memory.recall.models import DETAILS, LINE, NoteVector
from localai_memory.recall.ranking import details_parts
from tests.chats.helpers import new_chat, send

from .conftest import note, real_embeddings
from .test_recall_in_the_turn import recalled_section

pytestmark = pytest.mark.django_db

split = importlib.import_module("localai_memory.recall.migrations.0006_split_long_topic_files")

SEARCH = "/api/chats/memory/search"

#: A "work" note whose holiday rules are only in its last paragraph, well past the first ~90 words.
WORK = """I am a backend engineer at Finlytics, a payments startup. My team owns the ledger service, written \
in Go, and a handful of Python batch jobs that reconcile card settlements every night against the bank files.

We deploy twice a week through GitLab pipelines. Code review is mandatory, two approvals for anything \
touching the ledger. Most of my day goes into the settlement reconciliation jobs and their alerts; the rest \
into mentoring two junior developers, pairing with them on tricky migrations and reviewing their designs.

On call is one week in four. When a page comes in at night I first check the reconciliation dashboard in \
Grafana, then the queue depth in RabbitMQ, and only then wake up the database team. Postmortems are written \
within two days and read aloud at the Friday meeting, blameless, with one owner per follow-up.

Holidays go through my manager Giulia, who wants requests at least three weeks ahead; the whole office \
closes for the two middle weeks of August.
"""

#: ``recent-chats`` as the growth pass keeps it: one dated line per finished chat, newest first, 30 at most.
RECENT_CHATS = [
    "Compared two rice cookers and chose the one with a steel bowl.",
    "Drafted a polite reply to the landlord about the broken boiler.",
    "Went through the Kyoto itinerary day by day.",
    "Asked how to descale the espresso machine.",
    "Planned the week's dinners around leftover lentils.",
    "Wrote a cover letter for a staff engineer opening.",
    "Practised Japanese greetings for the trip.",
    "Fixed a flaky Go test that raced on a shared map.",
    "Chose running shoes with more cushioning for long runs.",
    "Sorted out the tax form for freelance income.",
    "Summarised a paper on consensus protocols.",
    "Picked a new houseplant that survives low light.",
    "Explained the cat's vaccination schedule.",
    "Compared train passes for the Japan trip.",
    "Wrote a haiku about autumn in Rome.",
    "Set up a budget spreadsheet for the flat.",
    "Debugged a slow SQL query on the ledger.",
    "Planned a ten kilometre tempo run.",
    "Translated a recipe for pasta alla Norma.",
    "Chose a gift for a colleague's farewell.",
    "Looked up the opening hours of the Vatican museums.",
    "Reviewed a pull request about retries.",
    "Made a packing list for a weekend in Florence.",
    "Asked about storing fresh basil.",
    "Compared two noise-cancelling headphones.",
    "Wrote notes for the team's Go workshop.",
    "Planned a surprise birthday picnic for my sister Marta at Villa Borghese.",
    "Asked what to feed a sourdough starter.",
    "Set reminders for the car's inspection.",
    "Chose paint colours for the small bedroom.",
]


def recent_chats_text() -> str:
    return "".join(f"- 2025-{12 - n // 3:02d}-{28 - n % 3 * 9:02d}: {line}\n" for n, line in enumerate(RECENT_CHATS))


def rows(owner, topic: str) -> list[NoteVector]:
    return list(NoteVector.objects.filter(owner=owner, topic=topic, kind=DETAILS).order_by("part"))


def recalled(owner, query: str) -> list[str]:
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query=query)
    return [item.note.topic for item in outcome.items]


@pytest.fixture
def long_work_note(owner) -> None:
    note(owner, "home", "lives in Rome", details="Moved to Trastevere in 2024, a flat near the river.")
    note(owner, "diet", "vegetarian", details="No meat; fish is fine now and then.")
    note(owner, "pets", "has a dog named Rex", details="Rex is a beagle, walks twice a day.")
    note(owner, "work", "backend engineer at Finlytics", details=WORK)


def test_a_long_topic_file_is_stored_as_parts_that_join_back_into_the_file(owner, long_work_note):
    parts = rows(owner, "work")
    assert [row.part for row in parts] == list(range(len(parts))) and len(parts) >= 3
    assert "".join(row.text for row in parts) == WORK
    assert all(row.embedding is not None and row.path == "Memory/work.md" for row in parts)
    assert [row.part for row in rows(owner, "home")] == [0]  # a short file stays one passage
    assert check_invariants() == []


def test_a_fact_in_the_last_paragraph_is_recalled_by_meaning(owner, long_work_note):
    assert "August" not in rows(owner, "work")[0].text  # not in what the embedder read of the file before
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()],
                                   query="When is my office closed in summer?")
    assert (outcome.mode, outcome.degraded) == ("semantic", None)
    assert [item.note.topic for item in outcome.items][:1] == ["work"]
    assert recalled(owner, "Who do I ask for time off?")[:1] == ["work"]


def test_the_turn_shows_the_part_that_matched_when_the_whole_file_does_not_fit(api, owner, model, long_work_note):
    body = send(api, new_chat(api), "When is my office closed in summer?")
    assert body["memory"]["recall"]["topics"][0] == "work"
    section = recalled_section(model.last_request)
    work = section[section.index("# work"):]
    assert "the whole office closes for the two middle weeks of August." in work
    assert "(the start of Memory/work.md is left out: ask context_read for work)" in work
    assert "- work: backend engineer at Finlytics" in work


def test_a_short_recalled_file_is_shown_from_its_start(api, owner, model, long_work_note):
    send(api, new_chat(api), "Which neighbourhood do I live in now?")
    section = recalled_section(model.last_request)
    assert "Moved to Trastevere in 2024, a flat near the river." in section
    assert "is left out" not in section


def test_search_quotes_the_line_of_the_part_that_matched(api, owner, long_work_note):
    results = api.get(SEARCH, {"q": "When is my office closed in summer?"}).json()["results"]
    assert results[0]["topic"] == "work" and results[0]["in"] == "details"
    assert results[0]["line"].startswith("Holidays go through my manager Giulia")
    assert results[0]["details"] == WORK


def test_without_embeddings_the_fact_is_found_by_its_words_in_the_last_part(api, owner, embeddings_off,
                                                                              long_work_note):
    embeddings_off()
    outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Who approves my holidays?")
    assert (outcome.mode, outcome.degraded) == ("lexical", "no_embedder")
    assert [item.note.topic for item in outcome.items] == ["work"]
    body = api.get(SEARCH, {"q": "holidays in August"}).json()
    [result] = body["results"]
    assert (body["mode"], result["topic"], result["in"]) == ("lexical", "work", "details")
    assert result["line"].startswith("Holidays go through my manager Giulia")


def test_an_old_line_of_a_30_line_recent_chats_file_is_recalled(owner):
    note(owner, "home", "lives in Rome", details="Moved to Trastevere in 2024, a flat near the river.")
    note(owner, "recent-chats", "what recent chats were about (one line per chat)", details=recent_chats_text())
    parts = rows(owner, "recent-chats")
    assert len(parts) >= 4 and next(n for n, row in enumerate(parts) if "Marta" in row.text) >= 3
    assert recalled(owner, "What did we plan for my sister's birthday?")[:1] == ["recent-chats"]
    [result] = service.search(owner_id=owner.pk, scopes=[Scope.user()], query="Marta's birthday picnic")["results"]
    assert result["line"] == next(line for line in recent_chats_text().splitlines() if "Marta" in line)


def test_shrinking_a_file_removes_its_extra_parts_and_growing_it_adds_them(owner, long_work_note):
    before = len(rows(owner, "work"))
    note(owner, "work", "backend engineer at Finlytics", details="Payments startup; on call one week in four.")
    assert [(row.part, row.text) for row in rows(owner, "work")] == [
        (0, "Payments startup; on call one week in four.\n")]
    assert recalled(owner, "When is my office closed in summer?")[:1] != ["work"]
    note(owner, "work", "backend engineer at Finlytics", details=WORK)
    assert len(rows(owner, "work")) == before and all(row.model_id for row in rows(owner, "work"))
    file_write(owner_id=owner.pk, path="Memory/work.md", version=3, content=WORK.split("\n\n")[0] + "\n")
    assert [row.part for row in rows(owner, "work")] == [0]
    assert not NoteVector.objects.filter(owner=owner, topic="work", part__gt=0).exists()


def test_a_write_embeds_only_the_parts_whose_text_changed(owner, openai_server, use_endpoint):
    openai_server.embed = real_embeddings
    use_endpoint(openai_server)
    paragraphs = WORK.strip().split("\n\n")
    note(owner, "work", "backend engineer at Finlytics", details="\n\n".join(paragraphs[:3]) + "\n")
    assert len(rows(owner, "work")) == 2 and len(openai_server.embedding_requests[-1]["input"]) == 3  # line + 2

    # A paragraph added at the end: only the new last part is embedded.
    note(owner, "work", "backend engineer at Finlytics", details="\n\n".join(paragraphs) + "\n")
    assert len(rows(owner, "work")) == 3
    [added] = openai_server.embedding_requests[-1]["input"]
    assert added.startswith("my work: Holidays go through my manager Giulia")
    assert index.scopes_sync(owner_id=owner.pk, scopes=[Scope.user()]).embedded == 0  # nothing changed since

    # A paragraph added at the top moves every part down one: each keeps the vector its text had.
    before = {row.text.strip(): np.asarray(row.embedding) for row in rows(owner, "work")}
    requests = len(openai_server.embedding_requests)
    top = ("Started in March 2023 after four years at a bank in Milan, writing risk reports in Java and SQL for "
           "the credit team, then moved to Rome for the payments job, a shorter commute by tram and a team "
           "that ships small changes every single week.")
    file_write(owner_id=owner.pk, path="Memory/work.md", version=2,
               content=top + "\n\n" + "\n\n".join(paragraphs) + "\n")
    assert [r["input"] for r in openai_server.embedding_requests[requests:]] == [[f"my work: {top}"]]
    after = rows(owner, "work")
    assert [row.text.strip() for row in after[1:]] == list(before)
    for row in after[1:]:
        assert np.allclose(np.asarray(row.embedding), before[row.text.strip()])


def test_a_note_whose_every_part_matches_is_one_result(api, owner, embeddings_off, embeddings_on):
    long_rome = "\n\n".join(
        f"Rome note {n}: the best {place} in Rome is worth a long walk across the city, early in the morning "
        f"before the crowds and the heat, with a coffee on the way and a map in the pocket."
        for n, place in enumerate(["fountain", "church", "market", "garden", "bridge", "square"]))
    note(owner, "rome", "favourite places in Rome", details=long_rome)
    note(owner, "home", "lives in Rome", details="Moved to Trastevere in 2024, a flat near the river.")
    assert len(rows(owner, "rome")) >= 3
    for mode in ("semantic", "lexical"):
        (embeddings_on if mode == "semantic" else embeddings_off)()
        body = api.get(SEARCH, {"q": "favourite places to walk in Rome"}).json()
        assert body["mode"] == mode
        topics = [r["topic"] for r in body["results"]]
        assert sorted(topics) == sorted(set(topics)) and "rome" in topics
        outcome = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="walks in Rome")
        items = [item.note.topic for item in outcome.items]
        assert len(items) == len(set(items)) and "rome" in items


def test_the_duplicate_check_reads_a_long_note_by_its_index_line(owner, long_work_note):
    duplicate = service.find_duplicate(owner_id=owner.pk, scope=Scope.user(), topic="job",
                                       summary="backend engineer at Finlytics")
    assert duplicate is not None and duplicate.topic == "work"
    assert service.find_duplicate(owner_id=owner.pk, scope=Scope.user(), topic="job",
                                  summary="backend engineer at Finlytics", details="Works from home.") is None


def test_the_upgrade_splits_an_existing_long_row_and_the_catch_up_embeds_its_parts(owner, long_work_note):
    # As the version before stored it: one row with the whole file and a vector of its first 128 tokens.
    NoteVector.objects.filter(owner=owner, topic="work", kind=DETAILS, part__gt=0).delete()
    NoteVector.objects.filter(owner=owner, topic="work", kind=DETAILS).update(text=WORK)
    home = NoteVector.objects.get(owner=owner, topic="home", kind=DETAILS)

    split.split_long_files(apps, None)

    parts = rows(owner, "work")
    assert [row.text for row in parts] == details_parts(WORK)
    assert [(row.model_id, row.dim, row.embedding) for row in parts] == [("", None, None)] * len(parts)
    assert len({(row.source, row.updated_at, row.path) for row in parts}) == 1
    untouched = NoteVector.objects.get(owner=owner, topic="home", kind=DETAILS)
    assert (untouched.text, untouched.model_id) == (home.text, home.model_id)  # short files keep their vector
    assert NoteVector.objects.get(owner=owner, topic="work", kind=LINE).model_id  # and so do index lines
    assert index.waiting_count(owner_id=owner.pk) == len(parts)

    assert index.catch_up_batch(owner_id=owner.pk).embedded == len(parts)
    assert recalled(owner, "When is my office closed in summer?")[:1] == ["work"]
    split.split_long_files(apps, None)  # a second run changes nothing
    assert all(row.model_id for row in rows(owner, "work"))


def test_going_back_joins_the_parts_into_one_row(owner, long_work_note):
    split.join_parts(apps, None)
    [row] = rows(owner, "work")
    assert (row.part, row.text, row.model_id) == (0, WORK, "")
    assert NoteVector.objects.filter(owner=owner, topic="home").count() == 2
