"""One note at a time over the API, as on the Memory tab: ``PUT /api/chats/memory/notes`` adds or replaces a
note, ``DELETE`` forgets it into the Trash; each is one change set with an Undo, and only the user's own."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from localai_memory.agents.models import Agent
from localai_memory.notes import selectors
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope

from .conftest import assert_error, post_json, put_json

pytestmark = pytest.mark.django_db

NOTES = "/api/chats/memory/notes"


def forget(client, **query):
    return client.delete(f"{NOTES}?{urlencode(query)}")


def test_a_note_is_added_replaced_forgotten_into_the_trash_and_undone(api, owner):
    added = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "details": "Trastevere."})
    assert added.status_code == 200, added.content
    assert added.json()["index"] == "- home: lives in Rome -> home.md\n"
    replaced = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon"})
    assert replaced.json()["index"] == "- home: lives in Lisbon -> home.md\n"
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "Trastevere.\n"

    gone = forget(api, topic="home")
    assert gone.status_code == 200 and gone.json()["trash"]["kind"] == "note"
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""
    undone = post_json(api, f"/api/chats/changes/{gone.json()['change']['id']}/undo", {})
    assert undone.status_code == 200, undone.content
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Lisbon -> home.md\n"


def test_a_note_posted_without_a_topic_is_named_from_its_words_once_and_undone(api, owner):
    home = post_json(api, NOTES, {"summary": "I live in Rome", "importance": 0.9})
    assert home.status_code == 201, home.content
    assert home.json()["topic"] == "live-rome" and home.json()["importance"] == 0.9
    again = post_json(api, NOTES, {"summary": "I live in Rome, in Monti.", "details": "Since 2024."})
    assert again.json()["topic"] == "live-rome-monti"
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == (
        "- live-rome: I live in Rome\n- live-rome-monti: I live in Rome, in Monti. -> live-rome-monti.md\n")
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "live-rome"): 0.9}

    same = assert_error(post_json(api, NOTES, {"summary": "i live in  rome."}), 409, "already_saved")
    assert same["details"] == {"topic": "live-rome", "scope": "user"}
    undone = post_json(api, f"/api/chats/changes/{again.json()['change']['id']}/undo", {})
    assert undone.status_code == 200, undone.content
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- live-rome: I live in Rome\n"


def test_a_posted_note_answers_the_versions_its_next_edit_sends(api, owner):
    posted = post_json(api, NOTES, {"summary": "I live in Rome"})
    assert posted.status_code == 201, posted.content
    listed = next(s for s in api.get(NOTES).json()["scopes"] if s["kind"] == "user")
    [entry] = listed["index"]
    assert posted.json()["index_version"] == listed["index_version"]
    assert posted.json()["note_version"] == entry["note_version"]

    edited = put_json(api, NOTES, {"topic": "live-rome", "summary": "I live in Rome, in Monti",
                                   "index_version": posted.json()["index_version"],
                                   "note_version": posted.json()["note_version"]})
    assert edited.status_code == 200, edited.content


@pytest.mark.parametrize(("summary", "topic"), [
    ("I don't eat meat", "dont-eat-meat"),
    ("I don\u2019t eat meat", "dont-eat-meat"),
    ("I am not married", "not-married"),
    ("No peanuts, ever", "no-peanuts"),
    ("I no longer live in Rome", "no-longer-live-rome"),
    ("I never drink coffee", "never-drink-coffee"),
    ("Coffee without sugar", "coffee-without-sugar"),
    ("I used to smoke", "used-smoke"),
])
def test_a_topic_named_from_a_posted_note_keeps_its_negation(api, owner, summary, topic):
    posted = post_json(api, NOTES, {"summary": summary})

    assert posted.status_code == 201, posted.content
    assert posted.json()["topic"] == topic
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == f"- {topic}: {summary}\n"


@pytest.mark.parametrize(("body", "code"), [
    ({"summary": "  "}, "invalid_summary"),
    ({"summary": "x" * 201}, "summary_too_long"),
    ({"summary": "tea", "importance": 2}, "invalid_importance"),
    ({"summary": "tea", "scope": "galaxy:1"}, "invalid_scope"),
])
def test_a_bad_posted_note_is_a_400_and_writes_nothing(api, owner, body, code):
    assert_error(post_json(api, NOTES, body), 400, code)
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""
    assert selectors.note_importances(owner_id=owner.pk) == {}


def test_a_note_posted_to_another_users_agent_is_a_404(api, outsider):
    theirs = Agent.objects.create(owner=outsider, name="Mallory's")
    assert_error(post_json(api, NOTES, {"summary": "x", "scope": f"agent:{theirs.pk}"}), 404)
    assert selectors.index_text(owner_id=outsider.pk, scope=Scope.agent(theirs.pk)) == ""


def test_the_listing_says_who_changed_each_note_last_when_and_when_a_chat_last_used_it(api, owner, time_machine):
    from localai_memory.notes.models import ChangeSet
    from localai_memory.notes.services import note_upsert
    from localai_memory.recall.service import notes_used

    time_machine.move_to("2026-12-01 09:30:00+00:00", tick=False)
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    time_machine.move_to("2026-12-01 10:00:00+00:00", tick=False)
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="drinks green tea",
                source=ChangeSet.Source.MODEL, actor="assistant")
    notes_used(owner_id=owner.pk, notes=[("user", "", "tea")])
    listing = api.get(NOTES).json()["scopes"][0]["index"]
    assert [(e["topic"], e["written_by"], e["written_at"], e["used_at"]) for e in listing] == [
        ("home", "user", "2026-12-01T09:30:00+00:00", None),
        ("tea", "model", "2026-12-01T10:00:00+00:00", "2026-12-01T10:00:00+00:00")]


def test_an_agents_notes_are_reached_by_its_scope_and_another_users_agent_is_a_404(api, owner, outsider):
    mine = Agent.objects.create(owner=owner, name="Chef")
    theirs = Agent.objects.create(owner=outsider, name="Mallory's")
    assert put_json(api, NOTES, {"topic": "menu", "summary": "no nuts", "scope": f"agent:{mine.pk}"}).status_code == 200
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.agent(mine.pk)) == "- menu: no nuts\n"
    assert_error(put_json(api, NOTES, {"topic": "menu", "summary": "x", "scope": f"agent:{theirs.pk}"}), 404)
    assert_error(forget(api, topic="menu", scope=f"agent:{theirs.pk}"), 404)
    assert selectors.index_text(owner_id=outsider.pk, scope=Scope.agent(theirs.pk)) == ""


def test_another_user_cannot_forget_my_note(api, outsider_api, owner):
    put_json(api, NOTES, {"topic": "diet", "summary": "vegan"})
    assert_error(forget(outsider_api, topic="diet"), 404, "unknown_topic")
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- diet: vegan\n"


@pytest.mark.parametrize(("body", "code"), [
    ({"topic": "Home!", "summary": "x"}, "invalid_topic"),
    ({"topic": "home", "summary": "  "}, "invalid_summary"),
    ({"topic": "home", "summary": "x", "scope": "galaxy:1"}, "invalid_scope"),
    ({"topic": "home", "summary": "x", "colour": "red"}, "unknown_field"),
    ({"topic": "home", "summary": 7}, None),
])
def test_bad_input_is_a_400_that_says_what_is_wrong_and_writes_nothing(api, owner, body, code):
    assert_error(put_json(api, NOTES, body), 400, code)
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""


def index_version_of(api, kind: str = "user") -> int | None:
    return next(s for s in api.get(NOTES).json()["scopes"] if s["kind"] == kind)["index_version"]


def test_an_edit_made_from_an_older_index_is_a_409_with_the_notes_as_they_are_now(api, owner):
    """Two clients read the notes, both edit one: the second, sending the index_version it read, is refused
    with the index as the first left it, instead of silently overwriting it."""
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    read = index_version_of(api)
    first = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon", "index_version": read})
    assert first.status_code == 200, first.content
    assert first.json()["index_version"] == index_version_of(api) > read

    error = assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Paris", "index_version": read}),
                         409, "stale_version")
    assert error["details"] == {"path": "Memory/index.md", "version": first.json()["index_version"],
                                "content": "- home: lives in Lisbon\n"}
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Lisbon\n"
    again = put_json(api, NOTES, {"topic": "home", "summary": "lives in Paris",
                                  "index_version": error["details"]["version"]})
    assert again.status_code == 200 and again.json()["index"] == "- home: lives in Paris\n"


def test_an_importance_or_a_first_note_from_an_older_read_is_refused_too(api, owner):
    assert index_version_of(api) is None  # no notes yet
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})  # another client, meanwhile
    assert_error(put_json(api, NOTES, {"topic": "diet", "summary": "vegetarian", "index_version": None}),
                 409, "stale_version")
    read = index_version_of(api)
    put_json(api, NOTES, {"topic": "diet", "summary": "vegetarian"})
    assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "importance": 0.9,
                                       "index_version": read}), 409, "stale_version")
    assert selectors.note_importances(owner_id=owner.pk) == {}
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == \
        "- home: lives in Rome\n- diet: vegetarian\n"


def test_an_edit_without_index_version_is_written_whatever_changed_meanwhile(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon"})
    assert put_json(api, NOTES, {"topic": "home", "summary": "lives in Paris"}).status_code == 200


@pytest.mark.parametrize("version", [0, "3", True, 1.5])
def test_an_index_version_that_is_not_a_version_is_a_400(api, owner, version):
    assert_error(put_json(api, NOTES, {"topic": "home", "summary": "x", "index_version": version}), 400)
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""


def note_version_of(api, topic: str, kind: str = "user") -> str | None:
    scope = next(s for s in api.get(NOTES).json()["scopes"] if s["kind"] == kind)
    return next((e["note_version"] for e in scope["index"] if e["topic"] == topic), None)


def test_a_details_only_edit_from_another_tab_makes_the_notes_version_stale(api, owner):
    """Two tabs read one note; the first changes only its details (its index line stays as it was): the
    second's edit, made from what it read, is refused with the note as it is now, and nothing is lost."""
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "details": "Trastevere."})
    read = note_version_of(api, "home")
    first = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "details": "Monti, since May.",
                                  "note_version": read})
    assert first.status_code == 200, first.content
    assert first.json()["note_version"] == note_version_of(api, "home") != read

    error = assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome, near the river",
                                               "note_version": read}), 409, "stale_version")
    assert "changed since you read it" in error["message"] and "lives in Rome" in error["message"]
    assert error["details"] == {"scope": "user", "topic": "home", "note_version": first.json()["note_version"],
                                "summary": "lives in Rome", "details": "Monti, since May.\n", "importance": None}
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "Monti, since May.\n"
    again = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome, near the river",
                                  "note_version": error["details"]["note_version"]})
    assert again.status_code == 200 and again.json()["index"] == "- home: lives in Rome, near the river -> home.md\n"


def test_a_delete_or_an_importance_from_an_older_read_of_the_note_is_refused_and_changes_nothing(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    read = note_version_of(api, "home")
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon"})  # another tab, meanwhile

    error = assert_error(forget(api, topic="home", note_version=read), 409, "stale_version")
    assert error["details"]["summary"] == "lives in Lisbon"
    error = assert_error(api.delete(f"{NOTES}?topic=home", {"note_version": read}, format="json"), 409,
                         "stale_version")
    error = assert_error(patch_json(api, {"topic": "home", "importance": 0.9, "note_version": read}), 409,
                         "stale_version")
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Lisbon\n"
    assert selectors.note_importances(owner_id=owner.pk) == {}

    now = error["details"]["note_version"]
    weighed = patch_json(api, {"topic": "home", "importance": 0.9, "note_version": now})
    assert weighed.status_code == 200 and weighed.json()["note_version"] == note_version_of(api, "home") != now
    assert_error(forget(api, topic="home", note_version=now), 409, "stale_version")  # the importance counts
    assert forget(api, topic="home", note_version=weighed.json()["note_version"]).status_code == 200
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""


def test_an_edit_of_another_note_leaves_a_notes_version_as_it_was(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    read = note_version_of(api, "home")
    put_json(api, NOTES, {"topic": "diet", "summary": "vegetarian"})
    put_json(api, NOTES, {"topic": "diet", "summary": "vegan", "details": "No honey."})

    assert note_version_of(api, "home") == read
    assert put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon", "note_version": read}).status_code == 200


def test_a_note_added_meanwhile_is_not_replaced_by_an_edit_that_read_none(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})  # another client, meanwhile
    error = assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Paris", "note_version": None}),
                         409, "stale_version")
    assert "was added" in error["message"]
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"


@pytest.mark.parametrize("version", ["", "3", "not-a-version-at-all", "ABCDEF012345678G", "abcdef01234567890"])
def test_a_note_version_that_is_not_one_is_a_400(api, owner, version):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    assert_error(put_json(api, NOTES, {"topic": "home", "summary": "x", "note_version": version}), 400)
    assert_error(forget(api, topic="home", note_version=version), 400)
    assert_error(patch_json(api, {"topic": "home", "importance": 1, "note_version": version}), 400)
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"


def test_a_note_version_in_capitals_is_the_same_version_on_every_route(api, owner):
    """A version is 16 hex digits, read the same way by the API, the terminal, the Memory tab and MCP
    (``notes.services.note_version_given``): in capitals, or with blanks around it, it is still the one GET
    listed, and a stale one in capitals is still stale."""
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    read = note_version_of(api, "home")

    edited = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon", "note_version": read.upper()})
    assert edited.status_code == 200, edited.content
    assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Paris", "note_version": read.upper()}),
                 409, "stale_version")
    blanks = f" {edited.json()['note_version'].upper()} "
    weighed = patch_json(api, {"topic": "home", "importance": 0.9, "note_version": blanks})
    assert weighed.status_code == 200, weighed.content
    now = weighed.json()["note_version"]
    gone = api.delete(f"{NOTES}?{urlencode({'topic': 'home', 'note_version': now.upper()})}", {"note_version": now},
                      format="json")  # the query's and the body's are one version, whatever their case
    assert gone.status_code == 200, gone.content
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""


def test_a_delete_naming_its_topic_or_scope_twice_is_a_400_and_forgets_nothing(api, owner):
    """The last of two values was taken: ``?topic=home&topic=diet`` forgot diet."""
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    put_json(api, NOTES, {"topic": "diet", "summary": "vegetarian"})

    error = assert_error(api.delete(f"{NOTES}?topic=home&topic=diet"), 400, "repeated_parameter")
    assert error["message"] == "the query parameter 'topic' is given 2 times ('home', 'diet'): send it once"
    assert_error(api.delete(f"{NOTES}?topic=diet&scope=agent:7&scope=user"), 400, "repeated_parameter")
    read = note_version_of(api, "diet")
    assert_error(api.delete(f"{NOTES}?topic=diet&note_version={read}&note_version={read}"), 400,
                 "repeated_parameter")
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ("- home: lives in Rome\n"
                                                                           "- diet: vegetarian\n")


def test_a_note_past_the_cap_is_a_422_listing_the_current_entries(api, owner):
    for n in range(INDEX_MAX_LINES):
        assert put_json(api, NOTES, {"topic": f"t{n:02d}", "summary": f"fact {n}"}).status_code == 200
    refused = assert_error(put_json(api, NOTES, {"topic": "one-more", "summary": "too many"}), 422, "cap_exceeded")
    assert len(refused["details"]["entries"]) == INDEX_MAX_LINES


# --- importance: how much recall weighs a note among others about as relevant --------------------------------


def patch_json(client, body):
    return client.patch(NOTES, body, format="json")


def score_of(client, topic: str, query: str) -> float:
    results = client.get("/api/chats/memory/search", {"q": query}).json()["results"]
    return next(r["score"] for r in results if r["topic"] == topic)


def test_importance_changes_how_recall_weighs_a_note_and_null_gives_it_back(api, owner):
    put_json(api, NOTES, {"topic": "tea", "summary": "drinks green tea every morning"})
    default = score_of(api, "tea", "green tea")

    raised = patch_json(api, {"topic": "tea", "importance": 1})
    assert raised.status_code == 200
    assert {k: raised.json()[k] for k in ("topic", "scope", "importance")} == {
        "topic": "tea", "scope": "user", "importance": 1.0}
    assert score_of(api, "tea", "green tea") > default
    listed = api.get(NOTES).json()["scopes"][0]["index"]
    assert [{k: v for k, v in e.items() if k not in ("written_by", "written_at", "used_at")} for e in listed] == [
        {"topic": "tea", "summary": "drinks green tea every morning", "file": None, "importance": 1.0,
         "category": "preference", "note_version": raised.json()["note_version"]}]

    assert patch_json(api, {"topic": "tea", "importance": 0}).status_code == 200
    assert score_of(api, "tea", "green tea") < default
    assert patch_json(api, {"topic": "tea", "importance": None}).json()["importance"] is None
    assert score_of(api, "tea", "green tea") == default


def test_a_note_and_its_importance_are_written_together(api, owner):
    added = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "importance": 0.9})
    assert added.status_code == 200
    assert api.get(NOTES).json()["scopes"][0]["index"][0]["importance"] == 0.9


@pytest.mark.parametrize("importance", [1.5, -0.1, "0.5", True, [1]])
def test_an_importance_that_is_not_a_number_from_0_to_1_is_a_400_and_writes_nothing(api, owner, importance):
    assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "importance": importance}),
                 400, "invalid_importance")
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == ""
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    assert_error(patch_json(api, {"topic": "home", "importance": importance}), 400, "invalid_importance")
    assert selectors.note_importances(owner_id=owner.pk) == {}


def test_an_importance_too_large_for_a_float_says_what_is_wrong(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    response = api.patch(NOTES, data='{"topic": "home", "importance": 1e400}', content_type="application/json")
    assert "from 0 to 1" in assert_error(response, 400, "invalid_importance")["message"]


def test_importance_of_a_missing_note_or_another_users_is_a_404(api, outsider_api, owner, outsider):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    assert_error(patch_json(api, {"topic": "garden", "importance": 1}), 404, "unknown_topic")
    assert_error(patch_json(outsider_api, {"topic": "home", "importance": 1}), 404, "unknown_topic")
    theirs = Agent.objects.create(owner=outsider, name="Mallory's")
    assert_error(patch_json(api, {"topic": "home", "scope": f"agent:{theirs.pk}", "importance": 1}), 404)
    assert selectors.note_importances(owner_id=owner.pk) == {}


def test_the_memory_tab_shows_an_importance_you_gave(client, owner):
    from localai_memory.notes.services import note_importance_set, note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="drinks green tea", source="files")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="tea", importance=0.95)
    client.force_login(owner)

    page = client.get("/settings/memory/").content.decode()

    assert page.count('data-testid="note-importance"') == 1 and "Importance 0.95 (you set it" in page


def test_a_deleted_agents_kept_notes_stay_yours_to_weigh_and_delete_and_nobody_elses(api, outsider_api, client, owner):
    from localai_memory.agents.services import agent_create, agent_delete
    from localai_memory.notes.services import note_upsert

    agent = agent_create(owner_id=owner.pk, name="Chef")
    scope = f"agent:{agent.pk}"
    for topic, summary in (("oven", "gas oven"), ("knives", "sharp knives")):
        note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic=topic, summary=summary, source="files")
    agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="keep")
    client.force_login(owner)
    assert "/settings/memory/notes/importance/" in client.get("/settings/memory/?tab=deleted").content.decode()

    assert patch_json(api, {"topic": "oven", "scope": scope, "importance": 0.9}).status_code == 200
    assert selectors.note_importances(owner_id=owner.pk) == {("agent", str(agent.pk), "oven"): 0.9}
    response = client.post("/settings/memory/notes/delete/", {"scope": scope, "topic": "knives"})
    assert response.status_code == 302
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.agent(agent.pk)) == "- oven: gas oven\n"

    # A kept note can be edited; a new one is never added to the folder (no chat would read it).
    assert put_json(api, NOTES, {"topic": "oven", "summary": "induction hob", "scope": scope}).status_code == 200
    assert_error(put_json(api, NOTES, {"topic": "pans", "summary": "cast iron", "scope": scope}), 410,
                 "agent_deleted")
    assert_error(post_json(api, NOTES, {"summary": "cast iron pans", "scope": scope}), 410, "agent_deleted")
    response = client.post("/settings/memory/notes/add/", {"scope": scope, "summary": "cast iron pans"},
                           follow=True)
    assert "its notes can be edited or deleted, not added to" in response.content.decode()
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.agent(agent.pk)) == "- oven: induction hob\n"

    # Another user naming that folder, or a deleted agent folder the owner has no notes in: 404.
    assert_error(patch_json(outsider_api, {"topic": "oven", "scope": scope, "importance": 0.1}), 404)
    assert_error(forget(outsider_api, topic="oven", scope=scope), 404)
    assert_error(put_json(api, NOTES, {"topic": "x", "summary": "y", "scope": "agent:999999"}), 404)
    assert selectors.note_importances(owner_id=owner.pk) == {("agent", str(agent.pk), "oven"): 0.9}


def test_the_trash_and_the_audit_name_an_agents_notes_by_its_name_as_the_listing_does(api, client, owner):
    from localai_memory.agents.services import agent_create, agent_delete
    from localai_memory.notes.models import TrashEntry

    agent = agent_create(owner_id=owner.pk, name="Chef")
    scope = f"agent:{agent.pk}"
    put_json(api, NOTES, {"topic": "oven", "summary": "gas oven", "scope": scope})
    put_json(api, NOTES, {"topic": "knives", "summary": "sharp knives", "scope": scope})
    assert [s["label"] for s in api.get(NOTES).json()["scopes"] if s["kind"] == "agent"] == ["Chef"]

    gone = forget(api, topic="oven", scope=scope).json()
    assert gone["trash"]["label"] == "“oven” in agent “Chef”"
    assert gone["change"]["summary"] == "Forgot oven in agent “Chef”"
    assert api.get("/api/chats/changes/audit").json()["changes"][1]["summary"] == "Saved knives in agent “Chef”"

    agent_delete(owner_id=owner.pk, agent_id=agent.pk, memory="keep")  # the deleted agent keeps its name
    assert put_json(api, NOTES, {"topic": "knives", "summary": "dull knives", "scope": scope}).json()[
        "change"]["summary"] == "Updated knives in agent “Chef”"
    client.force_login(owner)
    client.post("/settings/memory/folder/delete/", {"folder": f"Memory/agents/{agent.pk}"})
    assert TrashEntry.objects.filter(owner=owner).latest("id").label == "Notes of the deleted agent Chef"


def test_undoing_a_new_note_gives_back_the_importance_its_topic_had(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    patch_json(api, {"topic": "home", "importance": 0.9})
    forget(api, topic="home")
    saved = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon"}).json()["change"]
    assert selectors.note_importances(owner_id=owner.pk) == {}  # a new note starts from its writer's
    assert saved["importance"] == [{"scope": "user", "topic": "home", "before": 0.9, "after": None}]
    assert post_json(api, f"/api/chats/changes/{saved['id']}/undo", {}).status_code == 200
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.9}


def test_undoing_a_new_note_saved_with_its_own_importance_gives_back_the_one_its_topic_had(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    patch_json(api, {"topic": "home", "importance": 0.9})
    forget(api, topic="home")
    saved = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon", "importance": 0.5}).json()["change"]
    assert [(e["before"], e["after"]) for e in saved["importance"]] == [(0.9, None), (None, 0.5)]
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.5}
    assert post_json(api, f"/api/chats/changes/{saved['id']}/undo", {}).status_code == 200
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.9}


def test_the_same_text_with_a_new_importance_changes_only_the_importance(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    again = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "importance": 0.2})
    assert again.status_code == 200
    assert again.json()["change"]["files"] == []
    assert again.json()["change"]["importance"] == [{"scope": "user", "topic": "home", "before": None, "after": 0.2}]
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.2}
    assert_error(put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"}), 409, "no_change")


def test_an_importance_is_undone_as_any_change_and_a_later_one_is_never_lost(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    first = patch_json(api, {"topic": "home", "importance": 0.9}).json()["change"]
    assert first["summary"] == "Importance of home: 0.9"
    second = patch_json(api, {"topic": "home", "importance": 0.3}).json()["change"]
    assert patch_json(api, {"topic": "home", "importance": 0.3}).json()["change"] is None  # nothing changed

    stale = assert_error(post_json(api, f"/api/chats/changes/{first['id']}/undo", {}), 409, "changed_since")
    assert "The importance of home changed" in stale["message"]
    assert stale["details"] == {"paths": [], "importance": [{"scope": "user", "topic": "home"}]}
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.3}
    undone = post_json(api, f"/api/chats/changes/{second['id']}/undo", {})
    assert undone.status_code == 200, undone.content
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.9}
    assert post_json(api, f"/api/chats/changes/{first['id']}/undo", {}).status_code == 200
    assert selectors.note_importances(owner_id=owner.pk) == {}
    audit = api.get("/api/chats/changes/audit").json()["changes"]
    assert [c["summary"] for c in audit[:2]] == ["Undid: Importance of home: 0.9", "Undid: Importance of home: 0.3"]


def test_undoing_a_note_written_with_its_importance_takes_both_back(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    both = put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon", "importance": 0.9}).json()["change"]
    assert [f["path"] for f in both["files"]] == ["Memory/index.md"] and both["importance"][0]["after"] == 0.9
    assert post_json(api, f"/api/chats/changes/{both['id']}/undo", {}).status_code == 200
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"
    assert selectors.note_importances(owner_id=owner.pk) == {}


def test_another_user_cannot_undo_my_importance(api, outsider_api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    change = patch_json(api, {"topic": "home", "importance": 0.9}).json()["change"]
    assert_error(post_json(outsider_api, f"/api/chats/changes/{change['id']}/undo", {}), 404)
    assert selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.9}


def test_a_new_note_of_a_topic_that_once_had_an_importance_starts_from_the_default(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "importance": 1})
    forget(api, topic="home")
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Lisbon"})
    assert selectors.note_importances(owner_id=owner.pk) == {}


def test_importance_belongs_to_its_owner_and_its_scope(api, outsider_api, owner, outsider):
    """Two people's notes of one topic, and an agent's note of the same topic: each keeps its own."""
    mine = Agent.objects.create(owner=owner, name="Chef")
    put_json(api, NOTES, {"topic": "tea", "summary": "drinks green tea every morning"})
    put_json(api, NOTES, {"topic": "tea", "summary": "drinks green tea every morning", "scope": f"agent:{mine.pk}"})
    put_json(outsider_api, NOTES, {"topic": "tea", "summary": "drinks green tea every morning"})
    theirs_before = score_of(outsider_api, "tea", "green tea")

    patch_json(api, {"topic": "tea", "importance": 1})

    assert score_of(outsider_api, "tea", "green tea") == theirs_before
    scores = {r["scope"]: r["score"] for r in api.get("/api/chats/memory/search", {"q": "green tea"}).json()["results"]
              if r["topic"] == "tea"}
    assert scores["user"] > scores["agent"]


def test_the_turns_one_read_carries_the_importance_to_recall(api, owner):
    from localai_memory.chats.selectors import read_turn_memory
    from localai_memory.recall import service as recall_service

    put_json(api, NOTES, {"topic": "tea", "summary": "drinks green tea", "importance": 0.25})
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    scopes = {"user": Scope.user()}

    _, _, read, _ = read_turn_memory(owner_id=owner.pk, scopes=scopes,
                                  extra={"notes": recall_service.turn_notes_read(owner.pk, scopes)})

    by_topic = {note.topic: note.candidate(None).importance for note in read["notes"]}
    assert by_topic == {"tea": 0.25, "home": 0.8}  # home: a note you wrote, at its default


def test_empty_details_take_the_details_away_and_undo_gives_them_back(api, owner):
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome", "details": "Via Roma 1."})
    kept = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome, Monti"})  # left out: kept
    assert kept.json()["index"] == "- home: lives in Rome, Monti -> home.md\n"
    cleared = put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome, Monti", "details": ""})
    assert cleared.status_code == 200, cleared.content
    assert cleared.json()["index"] == "- home: lives in Rome, Monti\n"
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") is None
    assert post_json(api, f"/api/chats/changes/{cleared.json()['change']['id']}/undo", {}).status_code == 200
    assert selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "Via Roma 1.\n"


def test_each_note_has_a_kind_and_the_listing_shows_one_kind_when_asked(api, owner):
    for topic, summary, details in [("home", "lives in Rome", None), ("diet", "prefers vegan food", None),
                                    ("move", "decided to move to Lisbon next year", None),
                                    ("wifi", "home network", "the wifi password is hunter22"),
                                    ("langs", "speaks Spanish and Portuguese", None), ("misc", "Tokyo in October", None)]:
        assert put_json(api, NOTES, {"topic": topic, "summary": summary,
                                     **({"details": details} if details else {})}).status_code == 200
    [mine] = [s for s in api.get(NOTES).json()["scopes"] if s["kind"] == "user"]
    assert {e["topic"]: e["category"] for e in mine["index"]} == {
        "home": "identity", "diet": "preference", "move": "decision", "wifi": "credential", "langs": "skill",
        "misc": "fact"}
    [mine] = [s for s in api.get(NOTES, {"category": "preference"}).json()["scopes"] if s["kind"] == "user"]
    assert [e["topic"] for e in mine["index"]] == ["diet"]
    assert_error(api.get(NOTES, {"category": "hobby"}), 400, "invalid_category")


def test_the_profile_of_german_notes_lists_habits_as_preferences_and_no_nouns_as_names(api, owner):
    for topic, summary in [("kaffee", "Trinkt morgens Kaffee mit Milch"), ("nuesse", "Allergisch gegen Nüsse"),
                           ("home", "Wohnt in Berlin")]:
        put_json(api, NOTES, {"topic": topic, "summary": summary})
    body = api.get("/api/chats/memory/profile").json()
    assert [e["topic"] for e in body["categories"]["preference"]] == ["kaffee", "nuesse"]
    assert body["entities"] == [{"name": "Berlin", "notes": 1, "topics": ["home"]}]


def test_the_profile_groups_the_notes_by_kind_and_names_who_and_what_they_mention(api, owner, outsider_api):
    for topic, summary in [("brother", "brother Marco works at Fiat in Turin"), ("trip", "visiting Marco in Turin"),
                           ("diet", "prefers vegan food")]:
        put_json(api, NOTES, {"topic": topic, "summary": summary})
    body = api.get("/api/chats/memory/profile").json()
    assert list(body["categories"]) == ["credential", "decision", "preference", "skill", "project", "identity",
                                        "fact"]
    assert body["categories"]["preference"] == [{"scope": "user", "topic": "diet", "summary": "prefers vegan food"}]
    assert [e["topic"] for e in body["categories"]["identity"]] == ["brother"]
    assert body["entities"][:2] == [{"name": "Marco", "notes": 2, "topics": ["brother", "trip"]},
                                    {"name": "Turin", "notes": 2, "topics": ["brother", "trip"]}]
    assert {"name": "Fiat", "notes": 1, "topics": ["brother"]} in body["entities"]
    nobody = outsider_api.get("/api/chats/memory/profile").json()  # only one's own notes, ever
    assert nobody["entities"] == [] and not any(nobody["categories"].values())


def test_a_version_sent_for_a_note_that_is_not_there_does_not_claim_it_was_deleted(api, owner):
    """The version says what was read, not that the note was there: the topic may be misspelt."""
    put_json(api, NOTES, {"topic": "home", "summary": "lives in Rome"})
    read = note_version_of(api, "home")

    error = assert_error(put_json(api, NOTES, {"topic": "hmoe", "summary": "lives in Lisbon", "note_version": read}),
                         409, "stale_version")

    assert error["message"].startswith("There is no note 'hmoe' in your notes now (deleted since you read it, or "
                                       "never there), so nothing was changed.")
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"
