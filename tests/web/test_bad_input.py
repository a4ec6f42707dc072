"""The pages answer bad input with a message or a 404, never a 500, and never touch another user's things."""

from __future__ import annotations

import re
from html import unescape as html_unescape

import pytest

from localai_memory.agents.services import agent_create
from localai_memory.memory.selectors import memory_state
from localai_memory.notes.models import NoteFile


@pytest.fixture
def alice_client(client, owner):
    client.force_login(owner)
    return client


@pytest.mark.parametrize("path", ["../../etc/passwd", "Memory/../x.md", "Memory/a b.md", "notes.txt", ""])
def test_a_path_that_is_not_a_note_is_a_404(alice_client, path):
    assert alice_client.get("/files/open/", {"path": path}).status_code == 404
    assert alice_client.get("/files/history/", {"path": path}).status_code == 404
    assert alice_client.get("/settings/memory/note/", {"path": path}).status_code == 404


def test_a_save_level_that_does_not_exist_is_refused_and_nothing_changes(alice_client, owner):
    response = alice_client.post("/settings/memory/saving/", {"save_mode": "whenever"}, follow=True)
    assert response.status_code == 200
    assert "save_mode must be one of" in response.content.decode()
    assert memory_state(user_id=owner.pk).save_mode == "ask"


def test_a_note_for_someone_elses_agent_is_a_404(alice_client, outsider, owner):
    theirs = agent_create(owner_id=outsider.pk, name="Mallory's agent")
    response = alice_client.post("/settings/memory/notes/add/", {"scope": f"agent:{theirs.pk}", "topic": "x",
                                                                  "summary": "y"})
    assert response.status_code == 404
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_a_chat_with_someone_elses_agent_is_a_404(alice_client, outsider):
    theirs = agent_create(owner_id=outsider.pk, name="Mallory's agent")
    assert alice_client.post("/chats/new/", {"agent": theirs.pk}).status_code == 404
    assert alice_client.post("/chats/new/", {"agent": "abc"}).status_code == 404


def test_an_agent_form_with_a_rule_looser_than_yours_is_refused_with_the_form_kept(alice_client):
    response = alice_client.post("/agents/new/", {"name": "Loose", "memory": "mine", "memory_save": "auto"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "can only be stricter than your own level" in body
    assert 'value="Loose"' in body


def test_a_new_file_that_is_refused_keeps_what_was_typed(alice_client, owner):
    page = alice_client.post("/files/new/", {"path": "Memory/Home notes.md", "content": "Rome, since 2020."})
    html = page.content.decode()
    assert page.status_code == 400 and "Rome, since 2020." in html and 'value="Memory/Home notes.md"' in html
    assert 'role="alert"' in html and not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("version", ["abc", "1.0", "-1", "²", "9" * 30])
def test_a_delete_with_a_version_that_is_not_a_number_is_refused_and_deletes_nothing(alice_client, owner, version):
    from localai_memory.notes.services import file_write

    file_write(owner_id=owner.pk, path="Memory/home.md", content="Rome\n", version=None)
    page = alice_client.post("/files/delete/", {"path": "Memory/home.md", "version": version}, follow=True)
    assert page.status_code == 200
    assert "the version must be a whole number; nothing was deleted" in page.content.decode()
    assert NoteFile.objects.filter(owner=owner, path="Memory/home.md").exists()


def test_the_files_page_deletes_an_index_with_its_topic_files_and_says_so(alice_client, owner):
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", details="Monti.",
                source="files", actor="you")
    page = alice_client.post("/files/delete/", {"path": "Memory/index.md", "version": "1", "confirm": "yes"},
                             follow=True)
    assert "Moved Memory/index.md and its 1 topic file to the Trash." in page.content.decode()
    assert not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("editor", ["/files/open/", "/settings/memory/note/"])
def test_a_file_deleted_while_it_was_edited_keeps_the_text_typed(alice_client, owner, editor):
    from localai_memory.notes.services import file_delete, file_write

    file_write(owner_id=owner.pk, path="Memory/home.md", content="Rome.\n", version=None)
    file_delete(owner_id=owner.pk, path="Memory/home.md")  # in another tab
    page = alice_client.post(f"{editor}?path=Memory/home.md", {"content": "Rome, Monti.\n", "version": "1"})
    html = page.content.decode()
    assert page.status_code == 409 and "was deleted while you edited it" in html and "Rome, Monti." in html
    assert alice_client.post("/files/new/", {"path": "Memory/home.md", "content": "Rome, Monti.\n"}).status_code == 302
    assert NoteFile.objects.get(owner=owner, path="Memory/home.md").content == "Rome, Monti.\n"


def test_a_note_the_memory_tab_could_not_add_is_typed_again_in_its_form(alice_client, owner):
    page = alice_client.post("/settings/memory/notes/add/", {
        "scope": "user", "topic": "index", "summary": "my reading list", "details": "Dune; Solaris."}, follow=True)
    html = page.content.decode()
    assert 'value="my reading list"' in html and "Dune; Solaris." in html and 'class="add-note" open' in html
    assert "Dune; Solaris." not in alice_client.get("/settings/memory/").content.decode()  # shown once


def test_adding_a_note_of_a_topic_in_use_replaces_nothing_and_keeps_what_was_typed(alice_client, owner):
    from localai_memory.notes import selectors
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="anna", summary="sister Anna lives in Rome",
                source="files")
    page = alice_client.post("/settings/memory/notes/add/", {
        "scope": "user", "topic": "anna", "summary": "My name is Anna Jones"}, follow=True)
    html = page.content.decode()
    assert ('A note “anna” exists already: <a href="/settings/memory/note/?path=Memory%2Findex.md">open it</a> '
            'to change it' in html) and 'value="My name is Anna Jones"' in html
    assert "A topic in use is not replaced: open that note to change it." in html
    assert "a topic in use is replaced" not in html
    assert selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- anna: sister Anna lives in Rome\n"


def test_the_note_a_topic_in_use_names_opens_from_the_refusal(alice_client, owner):
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                details="Monti, near the Colosseum.", source="files")
    page = alice_client.post("/settings/memory/notes/add/", {
        "scope": "user", "topic": "home", "summary": "lives in Lisbon"}, follow=True)
    link = re.search(r'A note “home” exists already: <a href="([^"]+)">open it</a>', page.content.decode())

    assert link is not None
    opened = alice_client.get(html_unescape(link[1])).content.decode()
    assert "Monti, near the Colosseum." in opened


@pytest.mark.parametrize("importance", ["5", "nan", "inf", "-0.5", "lots"])
def test_an_importance_out_of_range_gets_the_forms_own_sentence(alice_client, owner, importance):
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="Rome", source="files")
    page = alice_client.post("/settings/memory/notes/importance/", {"scope": "user", "topic": "home",
                                                                     "importance": importance}, follow=True)
    assert "Importance is a number from 0 to 1, or empty for the default." in page.content.decode()


def test_a_form_posted_over_the_size_limit_gets_a_page_and_the_api_json(alice_client, api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = "x" * 2000
    page = alice_client.post("/files/new/", {"path": "Memory/big.md", "content": big}, HTTP_ACCEPT="text/html")
    assert page.status_code == 413 and page["Content-Type"].startswith("text/html")
    assert "larger than 1000 bytes; nothing was saved" in page.content.decode()
    refused = api.put("/api/files/content?path=Memory/big.md", {"content": big}, format="json",
                      HTTP_ACCEPT="text/html")
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "too_large"
    # htmx sends no Accept of its own: its request gets an alert put on top of the page, never raw JSON.
    swapped = alice_client.post("/files/new/", {"path": "Memory/big.md", "content": big}, HTTP_HX_REQUEST="true")
    assert swapped.status_code == 413 and swapped["HX-Retarget"] == "#main"
    assert swapped.content.decode().startswith('<p class="notice error" role="alert">The request body is larger')


def test_a_topic_file_no_index_line_names_is_shown_on_the_memory_tab(alice_client, owner):
    """A file made in Files (or left by an edit of the index) that no line names is still read by recall:
    the Memory tab shows it, with a way to open it."""
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import file_write, note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", details="Monti.",
                source="files")
    file_write(owner_id=owner.pk, path="Memory/plain.md", content="Bikes to work.\n", version=None)
    html = alice_client.get("/settings/memory/").content.decode()
    assert 'data-testid="unlisted-files"' in html
    assert '<a href="/settings/memory/note/?path=Memory/plain.md">plain.md</a>' in html
    assert "home.md</a>" not in html.split('data-testid="unlisted-files"')[1].split("</p>")[0]


def test_the_add_form_stores_details_with_plain_newlines_so_the_8_kib_cap_is_the_same_as_everywhere(alice_client,
                                                                                                   owner):
    details = ("x" * 63 + "\n") * 128  # exactly 8 KiB as the API and the terminal count it
    page = alice_client.post("/settings/memory/notes/add/", {
        "scope": "user", "topic": "lists", "summary": "long lists", "details": details.replace("\n", "\r\n")},
        follow=True)
    assert "Saved the note" in page.content.decode()
    assert NoteFile.objects.get(owner=owner, path="Memory/lists.md").content == details


@pytest.mark.parametrize("target", ["notes", "x", "files", "inbox", "https://evil.example/", "//evil.example/"])
def test_a_next_that_is_not_a_path_of_this_site_goes_back_to_the_page_of_the_form(alice_client, owner, target):
    from localai_memory.notes.services import file_write

    file_write(owner_id=owner.pk, path="Memory/zz.md", content="to delete\n", version=None)
    response = alice_client.post("/files/delete/", {"path": "Memory/zz.md", "next": target})
    assert response.status_code == 302 and re.fullmatch(r"/files/\?trashed=\d+", response["Location"])


def test_an_agent_file_nested_too_deep_is_a_message_not_an_error_page(alice_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("agent.json", b"[" * 2000 + b"]" * 2000, content_type="application/json")
    page = alice_client.post("/agents/import/", {"file": upload}, follow=True)
    assert page.status_code == 200 and "not an agent export" in page.content.decode()


def test_a_suggestion_dropped_by_forget_everything_says_so_in_the_inbox_not_that_it_expired(alice_client, owner):
    from localai_memory.memory.proposals import proposal_create
    from localai_memory.memory.services import memory_forget_all
    from localai_memory.notes.paths import Scope

    proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Lisbon")
    memory_forget_all(user_id=owner.pk)

    html = alice_client.get("/inbox/").content.decode()

    assert "Dropped: everything in memory was forgotten after it was suggested." in html
    assert "Expired <time" not in html and "Ask again in the chat" not in html  # what an expired one says
