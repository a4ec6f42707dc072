"""``manage.py memory …``: one test (at least) per command, refusals included, on the web app's own store."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
import zipfile
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from localai_memory.growth.services import memory_leftovers
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_create
from localai_memory.memory.services import settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet, FileVersion, NoteFile, TrashEntry
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope
from tests.fakes.openai_server import reply
from tests.support.proposals import decided_proposals

from .conftest import fact, facts_reply

pytestmark = pytest.mark.django_db


def memory(*args: str, stdin: str | None = None, **options: Any) -> str:
    out = io.StringIO()
    extra = {"stdin": io.StringIO(stdin)} if stdin is not None else {}
    call_command("memory", *args, stdout=out, **options, **extra)
    return out.getvalue()


def named(data: bytes, name: str) -> io.BytesIO:
    stream = io.BytesIO(data)
    stream.name = name
    return stream


def index(owner, scope: Scope | None = None) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=scope or Scope.user())


@pytest.fixture
def notes(owner):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               details="Moved to Rome in 2024.", source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(7), topic="tone", summary="short answers",
                               source="files", actor="you")


@pytest.fixture
def suggestion(owner):
    return proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                           source=Proposal.Source.CONSOLIDATION, origin="job")


def test_an_unknown_user_is_refused_by_name(db):
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        memory("list", user="nobody")


def test_list_prints_a_table_of_every_scope_with_who_changed_each_note_and_when(owner, notes, time_machine):
    time_machine.move_to("2026-12-01 09:30:00+00:00", tick=False)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="drinks green tea",
                               source=ChangeSet.Source.MODEL, actor="assistant")
    out = memory("list", user="alice")

    assert out.splitlines()[0].split() == ["scope", "topic", "summary", "file", "changed", "by", "when", "(UTC)",
                                           "version"]
    assert "user" in out and "lives in Rome" in out and "agent:7" in out and "short answers" in out
    home = next(line for line in out.splitlines() if "lives in Rome" in line)
    tea = next(line for line in out.splitlines() if "green tea" in line)
    assert home.split()[-4] == "you" and tea.split()[-4:-1] == ["assistant", "2026-12-01", "09:30"]


def terminal_columns(text: str) -> int:
    """Columns a terminal gives ``text``: two for a wide (Chinese, most emoji) or full-width character."""
    return sum(2 if unicodedata.east_asian_width(char) in ("W", "F") else 1 for char in text)


def test_list_lines_up_chinese_text_and_emoji_as_a_terminal_shows_them(owner):
    for topic, summary in (("home", "lives in Rome"), ("city", "住在罗马，喜欢吃面"),
                           ("pets", "🐶 has a dog named Rex"), ("food", "很" * 40)):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=topic, summary=summary,
                                   source="files", actor="you")
    header, rule, *rows = memory("list", user="alice").splitlines()

    start = terminal_columns(header[:header.index("changed by")])
    assert [terminal_columns(row[:row.index("  you ") + 2]) for row in rows] == [start] * 4
    assert terminal_columns(rule.split()[2]) == 60  # the summary column, at most 60 wide
    food = next(row for row in rows if "很" in row)
    assert "很" * 29 + "…" in food and "很" * 30 not in food


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_command_run_from_a_terminal_logs_nothing_on_stderr_unless_v_2_asks(make_user):
    """The embedder loading for a new note used to log an INFO line on every write; -v 2 still shows it."""
    from django.conf import settings

    from tests.api.test_two_processes import PROJECT_ROOT, test_database_url

    make_user("alice")
    env = {**os.environ, "DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL,
           "SECRET_KEY": "terminal-test-" + "k" * 40,
           "LOCALAI_MEMORY_EMBEDDINGS": "ondevice", "LOG_LEVEL": "INFO"}

    def terminal(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "manage.py", "memory", *args], cwd=PROJECT_ROOT, env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    quiet = terminal("add", "home", "lives in Rome", "--user", "alice")
    assert (quiet.returncode, quiet.stderr) == (0, ""), quiet.stderr
    assert quiet.stdout.startswith("Saved home in your notes")
    verbose = terminal("-v", "2", "add", "tea", "drinks green tea", "--user", "alice")
    assert verbose.returncode == 0 and "INFO localai_memory.recall.embedders: on-device embedder" in verbose.stderr


def test_list_and_show_print_no_escape_sequence_or_bidi_override_a_file_holds(owner):
    line = "- home: lives in Rome\x1b[2J\x07 \u202eevil\u200b\u009b31m -> home.md\n"
    notes_services.file_write(owner_id=owner.pk, path="Memory/index.md", content=line, version=None)
    notes_services.file_write(owner_id=owner.pk, path="Memory/home.md", content="Trastevere\x1b]0;pwned\x07\n",
                              version=None)

    for out in (memory("list", user="alice"), memory("show", "home", user="alice"),
                memory("list", user="alice", as_json=True)):
        assert not any(char in out for char in "\x1b\x07\u202e\u200b\u009b"), out
        assert "\\u001b" in out and "\\u202e" in out
    assert json.loads(memory("list", user="alice", as_json=True))["notes"][0]["summary"] == \
        "lives in Rome\x1b[2J\x07 \u202eevil\u200b\u009b31m"  # JSON says exactly what the file holds


def test_list_json_is_the_same_notes(owner, notes):
    data = json.loads(memory("list", user="alice", as_json=True))

    assert {(n["scope"], n["topic"]) for n in data["notes"]} == {("user", "home"), ("agent:7", "tone")}
    assert {n["written_by"] for n in data["notes"]} == {"user"} and all(n["written_at"] for n in data["notes"])
    assert [n["used_at"] for n in data["notes"]] == [None, None]


def test_list_of_another_user_shows_none_of_alices_notes(owner, outsider, notes):
    assert memory("list", user="mallory").strip() == "No notes."


def test_show_prints_the_line_the_details_and_the_last_change(owner, notes):
    out = memory("show", "home", user="alice")

    assert "lives in Rome" in out and "Moved to Rome in 2024." in out and "last change" in out


def test_show_refuses_a_topic_that_does_not_exist(owner, notes):
    with pytest.raises(CommandError, match="no note 'nowhere'"):
        memory("show", "nowhere", user="alice")


def test_add_saves_a_note_on_the_same_store(owner):
    out = memory("add", "diet", "vegetarian", "--details", "No meat, no fish.", user="alice")

    assert "Saved diet" in out
    assert "- diet: vegetarian -> diet.md" in index(owner)
    assert ChangeSet.objects.get(owner=owner).source == "cli"


def test_add_with_the_summary_alone_names_the_topic_from_its_words_and_refuses_it_twice(owner):
    out = memory("add", "I'm vegetarian since 2019", "--importance", "0.9", user="alice")

    assert "Saved vegetarian-since-2019" in out
    assert index(owner) == "- vegetarian-since-2019: I'm vegetarian since 2019\n"
    assert notes_selectors.note_importances(owner_id=owner.pk) == {("user", "", "vegetarian-since-2019"): 0.9}
    with pytest.raises(CommandError, match="already in your notes, as the note 'vegetarian-since-2019'"):
        memory("add", "i'm  vegetarian since 2019", user="alice")
    assert ChangeSet.objects.filter(owner=owner).count() == 1


def test_add_refuses_an_existing_topic_and_a_bad_topic(owner, notes):
    with pytest.raises(CommandError, match="exists already"):
        memory("add", "home", "lives in Paris", user="alice")
    with pytest.raises(CommandError, match="lower-case"):
        memory("add", "Not A Slug", "x", user="alice")


def test_add_past_the_cap_is_refused_with_the_current_entries(owner):
    for number in range(INDEX_MAX_LINES):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=f"t{number}", summary=f"n {number}",
                                   source="files", actor="you")

    with pytest.raises(CommandError) as refused:
        memory("add", "one-more", "too many", user="alice")

    assert "at most 40 lines" in str(refused.value) and "- t0: n 0" in str(refused.value)
    assert "one-more" not in index(owner)


def test_add_is_refused_while_the_server_has_files_off(owner, settings):
    settings.FILES_ENABLED = False

    with pytest.raises(CommandError, match="files off"):
        memory("add", "diet", "vegetarian", user="alice")


def test_forget_still_works_while_the_server_has_files_off(owner, notes, settings):
    settings.FILES_ENABLED = False

    memory("forget", "home", "--yes", user="alice")

    assert "home" not in index(owner)


def test_edit_changes_the_summary_and_keeps_the_file(owner, notes):
    memory("edit", "home", "--summary", "lives in Lisbon", user="alice")

    assert "- home: lives in Lisbon -> home.md" in index(owner)
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "Moved to Rome in 2024.\n"


def test_edit_refuses_a_missing_topic(owner):
    with pytest.raises(CommandError, match="use add"):
        memory("edit", "home", "--summary", "x", user="alice")


def test_forget_asks_first_and_removes_the_topic_when_confirmed(owner, notes):
    with pytest.raises(CommandError, match="Nothing was forgotten"):
        memory("forget", "home", user="alice", stdin="n\n")
    assert "home" in index(owner)

    out = memory("forget", "home", user="alice", stdin="y\n")

    assert "home" not in index(owner) and "in the Trash" in out
    entry = TrashEntry.objects.get(owner=owner)
    assert "“home” in your notes" in memory("trash", user="alice")
    memory("restore", str(entry.pk), user="alice")
    assert "home" in index(owner)


def test_forget_of_another_scope(owner, notes):
    memory("forget", "tone", "--scope", "agent:7", "-y", user="alice")

    assert index(owner, Scope.agent(7)) == ""


def test_trash_lists_and_restore_brings_back(owner, notes):
    notes_services.memory_forget(owner_id=owner.pk)
    entry = TrashEntry.objects.get(owner=owner)

    assert "Everything in Memory" in memory("trash", user="alice")
    memory("restore", str(entry.pk), user="alice")

    assert "lives in Rome" in index(owner)
    assert memory("trash", user="alice").strip() == "The Trash is empty."


def test_restore_refuses_an_entry_of_another_user(owner, outsider, notes):
    notes_services.memory_forget(owner_id=owner.pk)
    entry = TrashEntry.objects.get(owner=owner)

    with pytest.raises(CommandError, match="No such Trash entry"):
        memory("restore", str(entry.pk), user="mallory")


def test_proposals_lists_what_waits(owner, suggestion):
    out = memory("proposals", user="alice")

    assert str(suggestion.pk) in out and "diet" in out and "vegetarian" in out and "consolidation" in out


def test_proposals_all_lists_every_one_however_many(owner):
    """The inbox API pages them; the terminal lists them all (it cut them at 500 without a word)."""
    made = decided_proposals(owner, 501)
    listed = json.loads(memory("proposals", "--all", user="alice", as_json=True))["proposals"]
    assert [p["id"] for p in listed] == made
    assert len(memory("proposals", "--all", user="alice").splitlines()) == 2 + 501  # header, rule, rows


def test_accept_saves_a_suggestion(owner, suggestion):
    memory("accept", str(suggestion.pk), user="alice")

    assert "- diet: vegetarian" in index(owner)
    assert memory("proposals", user="alice").strip() == "No suggestions wait for you."


def test_accept_twice_is_refused(owner, suggestion):
    memory("accept", str(suggestion.pk), user="alice")

    with pytest.raises(CommandError, match="saved already"):
        memory("accept", str(suggestion.pk), user="alice")


def test_accept_of_an_expired_suggestion_is_refused(owner, suggestion, time_machine):
    time_machine.move_to(suggestion.created_at + __import__("datetime").timedelta(hours=25))

    with pytest.raises(CommandError, match="expired"):
        memory("accept", str(suggestion.pk), user="alice")
    assert "diet" not in index(owner)


def test_reject_drops_a_suggestion_and_another_user_cannot(owner, outsider, suggestion):
    with pytest.raises(CommandError, match="No such proposal"):
        memory("reject", str(suggestion.pk), user="mallory")

    out = memory("reject", str(suggestion.pk), user="alice")

    suggestion.refresh_from_db()
    assert suggestion.status == "rejected" and "diet" not in index(owner)
    # the word the web, the API and the bots use for a no
    assert out.strip() == f"Suggestion #{suggestion.pk}: Dropped: nothing was saved. It will not be suggested again."


def test_export_writes_the_zip_of_the_files(owner, notes, tmp_path):
    target = tmp_path / "mine.zip"

    memory("export", "--output", str(target), user="alice")

    with zipfile.ZipFile(target) as archive:
        assert sorted(archive.namelist()) == ["Memory/agents/7/index.md", "Memory/home.md", "Memory/index.md"]
        assert archive.read("Memory/home.md") == b"Moved to Rome in 2024.\n"


def test_export_refuses_a_place_it_cannot_write(owner, notes, tmp_path):
    with pytest.raises(CommandError, match="Cannot write"):
        memory("export", "--output", str(tmp_path / "missing" / "x.zip"), user="alice")


def test_import_reads_a_list_of_facts(owner, tmp_path):
    facts = tmp_path / "facts.txt"
    facts.write_text("- Lives in Porto\n- Prefers metric units\n")

    out = memory("import", str(facts), user="alice")

    assert "2 waiting" in out  # the default level asks first
    assert Proposal.objects.filter(owner=owner, source="import").count() == 2


def test_import_says_where_the_suggestions_wait_and_until_when(owner, tmp_path):
    import time_machine

    facts = tmp_path / "facts.txt"
    facts.write_text("- Lives in Porto\n")

    with time_machine.travel(datetime(2025, 6, 2, 14, 5, tzinfo=UTC), tick=False):
        out = memory("import", str(facts), user="alice")
        again = memory("import", str(facts), user="alice", as_json=True)  # it still waits

    [waiting] = Proposal.objects.filter(owner=owner)
    assert out.splitlines()[1] == (
        f"Waiting in your inbox for your answer: “lives-porto” (#{waiting.pk}) until 3 Jun 2025, 14:05 UTC. "
        "A suggestion not answered by then expires, and nothing of it is saved.")
    data = json.loads(again)
    assert data["waiting"] == [waiting.pk]
    assert data["inbox"] == [{"id": waiting.pk, "scope": "user", "where": "", "topic": "lives-porto",
                              "reason": waiting.reason, "expires_at": "2025-06-03T14:05:00+00:00",
                              "url": f"/inbox/#proposal-{waiting.pk}"}]


def test_import_refuses_a_text_file_named_zip_and_writes_nothing(owner, tmp_path):
    named = tmp_path / "notzip.zip"
    named.write_text("hello\n")

    with pytest.raises(CommandError, match="“notzip.zip” is named .zip but is not a zip file"):
        memory("import", str(named), user="alice")
    assert not Proposal.objects.filter(owner=owner).exists() and not NoteFile.objects.filter(owner=owner).exists()


def test_import_is_refused_where_the_policy_refuses(owner, tmp_path):
    settings_update(user_id=owner.pk, save_mode="never")
    facts = tmp_path / "facts.txt"
    facts.write_text("Lives in Porto\n")

    with pytest.raises(CommandError, match="Never"):
        memory("import", str(facts), user="alice")


def test_clear_asks_and_does_nothing_without_yes(owner, notes):
    with pytest.raises(CommandError, match="Nothing was erased"):
        memory("clear", user="alice", stdin="no\n")

    assert NoteFile.objects.filter(owner=owner).exists()


def test_clear_erases_everything_and_reads_it_back(owner, outsider, notes, suggestion):
    notes_services.file_write(owner_id=owner.pk, path="Memory/scratch.md", content="scratch text", version=None)
    notes_services.file_delete(owner_id=owner.pk, path="Memory/scratch.md")
    notes_services.note_upsert(owner_id=outsider.pk, scope=Scope.user(), topic="mine", summary="mallory's",
                               source="files", actor="you")

    out = memory("clear", user="alice", stdin="yes\n")

    assert "nothing is left" in out
    assert memory_leftovers(owner_id=owner.pk) == {}
    assert not FileVersion.objects.filter(owner=owner).exists()
    assert not TrashEntry.objects.filter(owner=owner).exists()
    assert not Proposal.objects.filter(owner=owner).exists()
    assert "mallory's" in index(outsider)  # only Alice's notes


@pytest.mark.parametrize("broken", [False, True])
def test_clear_asks_the_memory_addon_to_forget_its_notes_too(owner, notes, monkeypatch, broken):
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN", raising=False)
    provider_pick(user_id=owner.pk, provider="sample")
    store = {"garden": "grows tomatoes"}
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, store)
    if broken:
        monkeypatch.setenv("SAMPLE_PROVIDER_BROKEN", "1")
        with pytest.raises(CommandError, match="add-on could not forget its own notes"):
            memory("clear", "--yes", user="alice")
    else:
        assert "The memory add-on forgot its notes too." in memory("clear", "--yes", user="alice")
        assert store == {}
    assert memory_leftovers(owner_id=owner.pk) == {}  # the built-in notes are erased either way


def test_clear_also_wipes_what_chats_and_bots_kept_of_the_notes(owner, outsider, notes):
    """The record of what memory did on a chat turn, and a bot's note of what it asked in a conversation,
    hold note text too: clear wipes them and reads them back; the chats' messages themselves stay."""
    from bridges import services as bridges_services
    from bridges.models import Conversation, Notice
    from localai_memory.chats.models import Message
    from localai_memory.chats.services import chat_create, message_add

    def chat_with_a_saved_note(user):
        chat = chat_create(owner_id=user.pk)
        message_add(chat=chat, role="user", content="I am vegan", typed_by_user=True)
        Message.objects.create(chat=chat, role="assistant", content="Noted.",
                               memory={"saved": [{"topic": "diet", "summary": "vegan, no honey"}]})
        return chat

    mine, theirs = chat_with_a_saved_note(owner), chat_with_a_saved_note(outsider)
    binding = bridges_services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot",
                                              mode="webhook", credentials={"token": "123456:CLEAR-TOKEN"})
    conversation = Conversation.objects.create(binding=binding, external_id="5550001", kind="one_to_one",
                                               channel_key=f"{binding.pk}-abcdef012345", chat=mine)
    Notice.objects.create(conversation=conversation, kind="question", topic="diet", summary="vegan, no honey",
                          created_at=timezone.now())
    assert {"turn_memory_records", "bot_notices"} <= set(memory_leftovers(owner_id=owner.pk))

    data = json.loads(memory("clear", "-y", user="alice", as_json=True))

    assert data["cleared"] is True and data["left"] == {}
    assert data["deleted"]["turn_memory_records"] == 1 and data["deleted"]["bot_notices"] == 1
    assert list(Message.objects.filter(chat=mine).values_list("content", "memory")) == [
        ("I am vegan", {}), ("Noted.", {})]
    assert not Notice.objects.filter(conversation=conversation).exists()
    assert Message.objects.get(chat=theirs, role="assistant").memory["saved"][0]["summary"] == "vegan, no honey"


def test_clear_with_y_does_not_ask(owner, notes):
    data = json.loads(memory("clear", "-y", user="alice", as_json=True))

    assert data["cleared"] is True and data["left"] == {} and data["deleted"]["files"] == 3


def test_after_clear_a_version_held_from_before_is_stale_and_overwrites_no_new_note(owner, api):
    url = "/api/files/content?path=Memory/home.md"
    api.put(url, {"content": "Rome\n"}, format="json")
    held = api.put(url, {"content": "Rome, Trastevere\n", "version": 1}, format="json").json()["version"]
    memory("clear", "-y", user="alice")
    created = api.put(url, {"content": "Paris\n"}, format="json").json()["version"]  # written again, edited once
    now = api.put(url, {"content": "Paris, Marais\n", "version": created}, format="json").json()["version"]

    stale = api.put(url, {"content": "Rome, edited in a tab left open\n", "version": held}, format="json")

    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_version"
    assert (now, NoteFile.objects.get(owner=owner, path="Memory/home.md").content) == (held + 2, "Paris, Marais\n")
    assert list(FileVersion.objects.filter(owner=owner).order_by("version").values_list("version", flat=True)) \
        == [held + 1, held + 2]


def test_stats_prints_lines_and_bytes_against_the_caps(owner, notes, suggestion):
    out = memory("stats", user="alice")

    assert "1/40" in out and "agent:7" in out and "1 waiting" in out


def test_stats_says_memory_is_off_while_the_server_has_files_off(owner, notes, settings):
    assert memory("stats", user="alice").startswith("memory on, saving: ask")
    settings.FILES_ENABLED = False

    out = memory("stats", user="alice")
    data = json.loads(memory("stats", user="alice", as_json=True))

    assert out.startswith("memory off: files are off on this server (LOCALAI_MEMORY_FILES), and notes are files")
    assert "memory on" not in out
    assert data["memory"]["available"] is False and data["memory"]["unavailable"]["code"] == "server_files_off"


def test_stats_json(owner, notes):
    data = json.loads(memory("stats", user="alice", as_json=True))

    user = next(s for s in data["scopes"] if s["kind"] == "user")
    assert (user["lines"], user["max_lines"], user["max_bytes"]) == (1, 40, 2048)


def test_consolidate_suggests_from_recent_chats(owner, model, make_chat):
    make_chat(owner, "I moved to Lisbon last month.")
    model.script(reply(facts_reply(fact("home", "lives in Lisbon"))))

    out = memory("consolidate", user="alice")

    assert "1 suggestion(s)" in out
    assert "looked through 1 chat; 1 suggestion in your inbox" in memory("stats", user="alice")


def test_consolidate_is_refused_while_memory_is_off(owner, model):
    settings_update(user_id=owner.pk, enabled=False)

    with pytest.raises(CommandError, match="memory_off"):
        memory("consolidate", user="alice")


def test_add_and_edit_set_a_notes_importance_and_show_says_it(owner):
    memory("add", "tea", "drinks green tea", "--importance", "0.3", user="alice")
    assert "importance: 0.3 (you set it)" in memory("show", "tea", user="alice")
    assert notes_selectors.note_importances(owner_id=owner.pk) == {("user", "", "tea"): 0.3}

    out = memory("edit", "tea", "--importance", "default", user="alice", as_json=True)

    assert json.loads(out)["importance"] is None and notes_selectors.note_importances(owner_id=owner.pk) == {}
    assert "importance" not in memory("show", "tea", user="alice")
    with pytest.raises(CommandError, match="importance is a number from 0 to 1"):
        memory("edit", "tea", "--importance", "2", user="alice")


def test_edit_that_changes_nothing_says_so_and_fails_as_every_other_no_op(owner, notes):
    """The default importance of a note that has no other, or the one it has: nothing is written, and the
    terminal does not say "Updated"."""
    changes = ChangeSet.objects.filter(owner=owner).count()
    with pytest.raises(CommandError, match="Nothing to change: home in your notes has that importance already"):
        memory("edit", "home", "--importance", "default", user="alice")
    memory("edit", "home", "--importance", "0.7", user="alice")
    with pytest.raises(CommandError, match="Nothing to change"):
        memory("edit", "home", "--importance", "0.7", user="alice", as_json=True)
    with pytest.raises(CommandError, match="already holds exactly this note"):  # the text as it is: the same
        memory("edit", "home", "--summary", "lives in Rome", user="alice")
    assert ChangeSet.objects.filter(owner=owner).count() == changes + 1


def test_the_terminal_names_an_agents_notes_by_its_name(owner):
    """As the API and the Memory tab do: "agent “Cook”", not "agent 12"."""
    from localai_memory.agents.services import agent_create

    agent = agent_create(owner_id=owner.pk, name="Cook")
    scope = f"agent:{agent.pk}"
    assert "Saved oven in agent “Cook” (change #" in memory("add", "oven", "gas oven", "--scope", scope, user="alice")
    assert "Updated oven in agent “Cook”" in memory("edit", "oven", "--summary", "induction", "--scope", scope,
                                                   user="alice")
    assert "Forgot oven in agent “Cook”" in memory("forget", "oven", "-y", "--scope", scope, user="alice")
    assert "“oven” in agent “Cook”" in memory("trash", user="alice")
    with pytest.raises(CommandError, match="There is no note 'oven' in agent “Cook”"):
        memory("show", "oven", "--scope", scope, user="alice")


def test_clear_erases_the_importances_too(owner, notes):
    memory("edit", next(iter(notes_selectors.index_entries(owner_id=owner.pk, scope=Scope.user()))).topic,
           "--importance", "1", user="alice")
    assert memory_leftovers(owner_id=owner.pk).get("importances") == 1

    memory("clear", user="alice", stdin="yes\n")

    assert memory_leftovers(owner_id=owner.pk) == {}


def test_writes_go_only_to_scopes_of_ones_own(owner, outsider):
    """As the API: another's agent, an agent or bot that does not exist, is refused; one's own is fine."""
    from localai_memory.agents.services import agent_create

    theirs = agent_create(owner_id=outsider.pk, name="Mallory's")
    mine = agent_create(owner_id=owner.pk, name="Chef")
    for scope in (f"agent:{theirs.pk}", "agent:999999", "channel:999999-abcdef0123456789"):
        with pytest.raises(CommandError, match="No such"):
            memory("add", "--user", "alice", "t1", "x", "--scope", scope)
    assert not NoteFile.objects.filter(owner=owner).exists()
    memory("add", "--user", "alice", "t1", "x", "--scope", f"agent:{mine.pk}")
    assert index(owner, Scope.agent(mine.pk)) == "- t1: x\n"


def test_add_of_a_topic_another_add_saved_meanwhile_is_refused_not_overwritten(owner):
    """The check is the store's, under the owner's lock: the loser of two adds at once is told, not saved."""
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="race", summary="version A",
                               source="files", actor="you")
    with pytest.raises(CommandError, match="exists already"):
        memory("add", "--user", "alice", "race", "version B")
    assert index(owner) == "- race: version A\n"


def test_show_names_the_last_change_of_this_note_not_of_another_line(owner):
    memory("add", "--user", "alice", "lc-a", "first note A")
    memory("add", "--user", "alice", "lc-b", "second note B")
    assert "Saved lc-a" in memory("show", "--user", "alice", "lc-a").split("last change:")[1]
    memory("edit", "--user", "alice", "lc-a", "--importance", "0.3")
    shown = json.loads(memory("show", "--user", "alice", "lc-a", "--json"))
    assert shown["last_change"]["id"] == ChangeSet.objects.filter(owner=owner).order_by("-id").first().pk


def test_edit_with_empty_details_takes_them_away(owner, notes):
    memory("edit", "--user", "alice", "home", "--details", "")
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") is None
    assert index(owner) == "- home: lives in Rome\n"


def test_json_stays_json_when_asked_to_confirm(owner, notes):
    err = io.StringIO()
    out = memory("forget", "--user", "alice", "home", "--json", stdin="y\n", stderr=err)
    assert json.loads(out) and "Forget 'home'" in err.getvalue()


def test_import_counts_notes_and_names_a_zip_given_as_facts(owner, outsider, notes, tmp_path):
    export = tmp_path / "alice.zip"
    memory("export", "--user", "alice", "-o", str(export))
    out = memory("import", "--user", "mallory", str(export))
    assert "1 note(s) added" in out and "1 skipped" in out
    assert ("Skipped Memory/agents/7/: Not imported: agent 7 is not one of your agents, and the export does not say "
            "which agent it was.") in out  # not one of Mallory's: nothing is written under its id
    assert not NoteFile.objects.filter(owner=outsider, path__startswith="Memory/agents/").exists()
    with pytest.raises(CommandError, match="is a zip"):
        memory("import", "--user", "mallory", "--facts", str(export))


#: What the API and the Memory tab say of a file that is no zip but named one, and of one that is not text.
FACTS_REFUSED = ("is named .zip but is not a zip file. Import the zip that Export makes, or a list of facts as plain "
                 "text, one fact a line.")
NOT_TEXT = ("The file is neither a zip nor UTF-8 text. Import the zip that Export makes, or a list of facts as "
            "plain text, one fact a line.")


@pytest.mark.parametrize(("content", "name", "words"), [
    (b"Lives in Porto\n", "notes.zip", f"“notes.zip” {FACTS_REFUSED}"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "photo.png", NOT_TEXT),
])
def test_import_of_facts_refuses_a_file_the_api_and_the_tab_refuse_in_their_words(owner, tmp_path, content, name,
                                                                                 words):
    given = tmp_path / name
    given.write_bytes(content)
    uploaded = APIClient()
    uploaded.force_authenticate(owner)
    said = uploaded.post("/api/chats/memory/import", {"file": named(content, name)}, format="multipart")
    assert said.status_code == 400 and said.json()["error"]["message"] == words

    with pytest.raises(CommandError) as refused:
        memory("import", "--user", "alice", "--facts", str(given))

    assert str(refused.value) == words  # one line, the API's and the Memory tab's
    assert not Proposal.objects.filter(owner=owner).exists() and not NoteFile.objects.filter(owner=owner).exists()


def test_import_says_which_agent_a_folder_went_to(owner, outsider, tmp_path):
    from localai_memory.agents.models import Agent

    alices, mallorys = (Agent.objects.create(owner=user, name="Cook") for user in (owner, outsider))
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(alices.pk), topic="tone",
                               summary="short answers", source="files", actor="you")
    export = tmp_path / "alice.zip"
    memory("export", "--user", "alice", "-o", str(export))

    out = memory("import", "--user", "mallory", str(export))

    assert f"Memory/agents/{alices.pk}/ → Memory/agents/{mallorys.pk}/ (“Cook”)" in out
    assert index(outsider, Scope.agent(mallorys.pk)) == "- tone: short answers\n"
    moved = json.loads(memory("import", "--user", "mallory", "--json", str(export)))["moved"]
    assert moved == [{"from": f"Memory/agents/{alices.pk}/", "to": f"Memory/agents/{mallorys.pk}/", "name": "Cook"}]


def test_import_says_which_folders_went_back_to_an_agent_renamed_or_deleted_since(owner, tmp_path):
    from localai_memory.agents.models import Agent
    from localai_memory.agents.services import agent_delete, agent_update

    cook, baker = (Agent.objects.create(owner=owner, name=name) for name in ("Cook", "Baker"))
    for agent in (cook, baker):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="tone",
                                   summary="short answers", source="files", actor="you")
    export = tmp_path / "alice.zip"
    memory("export", "--user", "alice", "-o", str(export))
    agent_update(owner_id=owner.pk, agent_id=cook.pk, name="Chef")
    agent_delete(owner_id=owner.pk, agent_id=baker.pk, memory="delete")
    notes_services.memory_forget(owner_id=owner.pk, actor="you")

    out = memory("import", "--user", "alice", str(export))

    assert "2 note(s) added" in out and "0 skipped" in out
    assert f"Memory/agents/{cook.pk}/ back to “Chef”, renamed since (“Cook” in the export)" in out
    assert (f"Memory/agents/{baker.pk}/ to the notes kept from the deleted agent “Baker” (Deleted agents on the "
            "Memory tab; no chat reads them)") in out


def test_a_fact_that_looks_like_a_password_does_not_name_its_topic(owner, tmp_path):
    facts = tmp_path / "facts.txt"
    facts.write_text("my password is hunter2\n")
    memory("import", "--user", "alice", str(facts))
    assert [p.topic for p in Proposal.objects.filter(owner=owner)] == ["private-note"]


def test_add_adopts_a_stray_topic_file_that_has_no_line(owner):
    NoteFile.objects.create(owner=owner, path="Memory/books.md", content="Dune, twice.\n", version=1,
                            updated_at=timezone.now())
    memory("add", "--user", "alice", "books", "reads science fiction")
    assert index(owner) == "- books: reads science fiction -> books.md\n"


@pytest.mark.django_db(transaction=True)
def test_edit_of_the_details_keeps_a_summary_changed_while_it_waited_for_the_lock(owner):
    """The web changes the summary while `edit --details` waits for the owner's lock: the summary the
    terminal writes back is the one under the lock, not the one it read before."""
    import threading

    from django.db import connection, transaction

    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               details="Trastevere.", source="files", actor="you")
    web_holds_lock, web_may_commit = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def web_edit() -> None:
        try:
            with transaction.atomic():
                notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home",
                                           summary="lives in Paris", source="files", actor="you")
                web_holds_lock.set()
                web_may_commit.wait(10)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    def terminal_edit() -> None:
        try:
            memory("edit", "home", "--details", "Marais.", user="alice")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    web = threading.Thread(target=web_edit)
    web.start()
    assert web_holds_lock.wait(10)
    terminal = threading.Thread(target=terminal_edit)
    terminal.start()
    with connection.cursor() as cursor:
        for _ in range(2000):  # until the terminal waits on the owner's lock (or has already gone by)
            cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            if cursor.fetchone()[0] or not terminal.is_alive():
                break
            terminal.join(0.005)
    web_may_commit.set()
    web.join(10)
    terminal.join(10)

    assert errors == []
    assert index(owner) == "- home: lives in Paris -> home.md\n"
    assert notes_selectors.topic_text(owner_id=owner.pk, scope=Scope.user(), topic="home") == "Marais.\n"


def test_list_and_show_print_each_notes_version_and_edit_and_forget_refuse_a_stale_one(owner, notes):
    """The version the API and the Memory tab use (its line, details and importance): a note changed since the
    terminal read it (here its details only, from the web) is left as it is, with exit 1 and one line saying
    how it reads now; the version read afresh works, and leaving --version out checks nothing, as before."""
    listed = json.loads(memory("list", user="alice", as_json=True))["notes"]
    read = next(n["note_version"] for n in listed if n["topic"] == "home")
    assert read == notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(), topic="home")
    home = next(line for line in memory("list", user="alice").splitlines() if "lives in Rome" in line)
    assert home.split()[-1] == read
    assert f"version: {read}" in memory("show", "home", user="alice")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               details="Moved to Rome in 2024, then to Trastevere.", source="files", actor="you")

    for command in (("edit", "home", "--summary", "lives in Milan"), ("forget", "home", "-y")):
        with pytest.raises(CommandError) as refused:
            memory(*command, "--version", read, user="alice")
        now = json.loads(memory("show", "home", user="alice", as_json=True))["note_version"]
        assert str(refused.value) == (
            "The note 'home' in your notes changed since you read it, so nothing was changed. It now reads: "
            "'lives in Rome', with the details 'Moved to Rome in 2024, then to Trastevere.' "
            f"(version {now}). Look at it again and apply your change to it if you still want it.")
    assert "- home: lives in Rome -> home.md" in index(owner)
    with pytest.raises(CommandError, match="16 hex digits"):
        memory("edit", "home", "--summary", "lives in Milan", "--version", "yesterday", user="alice")

    now = json.loads(memory("show", "home", user="alice", as_json=True))["note_version"]
    memory("edit", "home", "--importance", "0.3", "--version", now, user="alice")
    with pytest.raises(CommandError, match="changed since you read it") as refused:  # its importance changed it
        memory("forget", "home", "-y", "--version", now, user="alice")
    assert "importance 0.3" in str(refused.value)
    now = json.loads(memory("show", "home", user="alice", as_json=True))["note_version"]
    memory("forget", "home", "-y", "--version", now, user="alice")
    assert "home" not in index(owner)
    memory("forget", "tone", "--scope", "agent:7", "-y", user="alice")  # unchecked
    assert index(owner, Scope.agent(7)) == ""


def test_edit_and_add_json_give_the_notes_new_version_for_the_next_checked_edit(owner, notes):
    """As PUT and PATCH of the API answer it: a script edits twice, each time checked, without listing again."""
    listed = json.loads(memory("list", user="alice", as_json=True))["notes"]
    read = next(n["note_version"] for n in listed if n["topic"] == "home")

    first = json.loads(memory("edit", "home", "--summary", "lives in Milan", "--version", read, user="alice",
                              as_json=True))
    assert first["note_version"] == notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(),
                                                                     topic="home") != read
    second = json.loads(memory("edit", "home", "--importance", "0.3", "--version", first["note_version"],
                               user="alice", as_json=True))
    assert second["note_version"] == notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(),
                                                                      topic="home") != first["note_version"]
    said = memory("edit", "home", "--details", "Navigli.", "--version", second["note_version"], user="alice")
    now = notes_selectors.note_version_now(owner_id=owner.pk, scope=Scope.user(), topic="home")
    assert said.endswith(f"; version {now}).\n")  # the table's reader sees it too

    added = json.loads(memory("add", "diet", "vegetarian", user="alice", as_json=True))
    worded = json.loads(memory("add", "prefers tea to coffee", user="alice", as_json=True))
    for note in (added, worded):
        memory("edit", note["saved"], "--importance", "0.9", "--version", note["note_version"], user="alice")
    assert notes_selectors.note_importances(owner_id=owner.pk) == {
        ("user", "", "home"): 0.3, ("user", "", "diet"): 0.9, ("user", "", worded["saved"]): 0.9}


def test_a_version_in_capitals_is_the_one_list_printed_as_the_api_and_mcp_read_it(owner, notes):
    read = json.loads(memory("show", "home", user="alice", as_json=True))["note_version"]

    memory("edit", "home", "--summary", "lives in Milan", "--version", f" {read.upper()} ", user="alice")

    assert "- home: lives in Milan -> home.md" in index(owner)
    with pytest.raises(CommandError, match="changed since you read it"):
        memory("forget", "home", "-y", "--version", read.upper(), user="alice")
    with pytest.raises(CommandError, match="16 hex digits"):
        memory("forget", "home", "-y", "--version", read.upper() + "0", user="alice")
