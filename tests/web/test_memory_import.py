"""Import on the Memory tab: an export zip or a list of facts goes back in through the same service as the API
and the terminal, the answer is shown in their words, and a refusal is said beside the form with nothing written.

The form is tested through Django's test client; the browser tests click through it with and without
JavaScript, as a person would.
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import pytest
import time_machine
from django.test import Client
from playwright.sync_api import expect

from localai_memory.agents.models import Agent
from localai_memory.core.invariants import check_invariants
from localai_memory.core.middleware import MULTIPART_ROOM
from localai_memory.growth import importing
from localai_memory.memory.models import Proposal
from localai_memory.memory.services import settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet, NoteFile
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope
from tests.growth.test_import import a_zip_of_exactly

from .conftest import signed_in

IMPORT = "/settings/memory/import/"
TAB = "/settings/memory/"


def a_zip(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def named(data: bytes, name: str) -> io.BytesIO:
    stream = io.BytesIO(data)
    stream.name = name
    return stream


def add(owner, topic: str, summary: str, scope: Scope | None = None) -> None:
    notes_services.note_upsert(owner_id=owner.pk, scope=scope or Scope.user(), topic=topic, summary=summary,
                               source="files", actor="you")


def index(owner) -> str:
    return notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())


def shown(client: Client, response) -> str:
    """The tab the import's redirect lands on, as the person sees it (its Import part)."""
    assert response.status_code == 302 and response["Location"] == f"{TAB}#import", response
    page = client.get(TAB).content.decode()
    start = page.index('id="import"')
    return page[start:]


def nothing_written(owner, before: dict[str, str] | None = None) -> bool:
    files = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    return files == (before or {}) and not Proposal.objects.filter(owner=owner).exists()


@pytest.fixture
def alices_export(owner):
    """Alice's notes (her own and her agent Cook's) and their export; then she forgets "diet" (to the Trash)."""
    cook = Agent.objects.create(owner=owner, name="Cook", tools=["memory"], grants=["memory.write"], memory="own")
    add(owner, "home", "lives in Rome")
    add(owner, "diet", "vegetarian")
    add(owner, "tone", "short answers", Scope.agent(cook.pk))
    exported = notes_services.memory_export(owner_id=owner.pk)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", delete=True, source="files",
                               actor="you")
    return exported


@pytest.mark.django_db
def test_an_export_zip_goes_back_in_from_the_tab_and_the_answer_links_each_waiting_suggestion(owner, alices_export):
    add(owner, "home", "lives in Lisbon")  # says something else than the export now
    client = signed_in(owner)

    with time_machine.travel(datetime(2025, 6, 2, 14, 5, tzinfo=UTC), tick=False):
        response = client.post(IMPORT, {"file": named(alices_export, "memory-export-2025-06-01.zip")})
        part = shown(client, response)

    home = Proposal.objects.get(owner=owner, topic="home")
    diet = Proposal.objects.get(owner=owner, topic="diet")
    assert (home.reason, diet.reason) == ("import_differs", "import_deleted")
    assert "Imported: 0 note(s) added, 2 waiting for your answer, 1 unchanged, 0 skipped." in part
    assert f'<a href="/inbox/#proposal-{home.pk}">“home” (#{home.pk})</a> — until' in part
    assert (f'<a href="/inbox/#proposal-{diet.pk}">“diet” (#{diet.pk})</a> — you deleted it; it is in your Trash '
            "— until") in part
    assert '<time datetime="2025-06-03T14:05:00+00:00" data-local="date-time">3 Jun 2025, 14:05 UTC</time>' in part
    assert "A suggestion not answered by then expires, and nothing of it is saved." in part
    assert "Unchanged: Memory/agents/" in part
    assert "- home: lives in Lisbon" in index(owner) and "diet" not in index(owner)  # nothing overwritten
    assert "Imported:" not in client.get(TAB).content.decode()  # said once


@pytest.mark.django_db
def test_a_zip_into_an_empty_account_is_written_back_and_a_folder_without_its_agent_is_skipped_with_why(
        owner, make_user, alices_export):
    newcomer = make_user("newcomer")
    client = signed_in(newcomer)

    part = shown(client, client.post(IMPORT, {"file": named(alices_export, "alice.zip")}))

    assert "Imported: 2 note(s) added, 0 waiting for your answer, 0 unchanged, 1 skipped." in part
    assert "Written back: Memory/index.md" in part
    assert re.search(r"Skipped Memory/agents/\d+/: Not imported: none of your agents is named “Cook”", part)
    assert index(newcomer) == "- home: lives in Rome\n- diet: vegetarian\n"
    assert ChangeSet.objects.get(owner=newcomer).source == "import"


@pytest.mark.django_db
def test_the_tab_says_where_each_folder_went_that_did_not_simply_go_back_to_its_agent_or_bot(owner):
    from bridges.models import Binding
    from bridges.services import binding_delete
    from localai_memory.agents.services import agent_delete

    cook = Agent.objects.create(owner=owner, name="Cook", tools=["memory"], grants=["memory.write"], memory="own")
    bot = Binding.objects.create(owner=owner, platform="telegram", name="Home bot", mode="polling")
    conversation = Scope.channel(bot.pk, "C123")
    add(owner, "tone", "short answers", Scope.agent(cook.pk))
    add(owner, "team", "Friday demos", conversation)
    exported = notes_services.memory_export(owner_id=owner.pk)
    agent_delete(owner_id=owner.pk, agent_id=cook.pk, memory="keep")
    binding_delete(binding=bot)
    client = signed_in(owner)

    part = shown(client, client.post(IMPORT, {"file": named(exported, "alice.zip")}))

    folders = part[part.index('data-testid="import-folders"'):]
    assert (f"<li>Memory/agents/{cook.pk}/ to the notes kept from the deleted agent “Cook” (Deleted agents on the "
            "Memory tab; no chat reads them)</li>") in folders
    assert (f"<li>{conversation.root}/ back to the notes left from the Telegram bot “Home bot”, which you removed "
            "(Files; no chat reads them)</li>") in folders


@pytest.mark.django_db
def test_a_list_of_facts_from_the_text_area_waits_in_the_inbox_with_its_time(owner):
    client = signed_in(owner)

    with time_machine.travel(datetime(2025, 6, 2, 9, 30, tzinfo=UTC), tick=False):
        part = shown(client, client.post(IMPORT, {"facts": "- Lives in Porto\r\n- Plays the violin\r\n"}))

    porto, violin = Proposal.objects.filter(owner=owner).order_by("pk")
    assert (porto.summary, violin.summary, porto.source) == ("Lives in Porto", "Plays the violin", "import")
    assert "Imported: 0 note(s) added, 2 waiting for your answer, 0 unchanged, 0 skipped." in part
    assert f'href="/inbox/#proposal-{porto.pk}">“lives-porto” (#{porto.pk})</a> — until' in part
    assert "3 Jun 2025, 09:30 UTC" in part
    assert not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.django_db
def test_facts_saved_at_once_under_save_and_tell_are_listed_as_added(owner):
    settings_update(user_id=owner.pk, save_mode="auto")
    client = signed_in(owner)

    part = shown(client, client.post(IMPORT, {"facts": "Lives in Porto"}))

    assert "Imported: 1 note(s) added, 0 waiting for your answer" in part
    assert "Added: Memory/lives-porto" in part
    assert index(owner) == "- lives-porto: Lives in Porto\n"


@pytest.mark.django_db
@pytest.mark.parametrize(("form", "says"), [
    ({"file": ("notzip.zip", b"hello\n")}, "“notzip.zip” is named .zip but is not a zip file."),
    ({"file": ("broken.zip", b"PK\x03\x04 not really a zip")}, "This is not a zip file"),
    ({"file": ("photo.png", b"\x89PNG\r\n\x1a\n\x00")}, "The file is neither a zip nor UTF-8 text."),
    ({"file": ("evil.zip", a_zip({"../etc/passwd": "x"}))}, "&#x27;..&#x27;"),
    ({"facts": '{"memories": [{"text": "likes tea"}]}'}, "This is a JSON document, not a list of facts."),
    ({"facts": "   \n"}, "Choose an export zip, or type the facts to import, one a line."),
    ({}, "Choose an export zip, or type the facts to import, one a line."),
])
def test_what_import_cannot_take_is_said_beside_the_form_and_nothing_is_written(owner, form, says):
    add(owner, "home", "lives in Rome")
    before = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    client = signed_in(owner)
    if "file" in form:
        form = {"file": named(form["file"][1], form["file"][0])}

    part = shown(client, client.post(IMPORT, form))

    assert re.search(r'<div class="flash here" role="status" tabindex="-1" data-flash-here>\s*'
                     r'<p class="notice error">[^<]*' + re.escape(says), part), part[:1500]
    assert nothing_written(owner, before)


@pytest.mark.django_db
def test_refused_facts_are_typed_again_in_their_form(owner):
    client = signed_in(owner)

    part = shown(client, client.post(IMPORT, {"facts": '[{"text": "likes tea"}]'}))

    assert re.search(r'<textarea id="id_import_facts"[^>]*>\[\{&quot;text&quot;: &quot;likes tea&quot;\}\]</textarea>',
                     part)
    assert "likes tea" not in client.get(TAB).content.decode()  # once


#: What the Import part says of a file past the largest zip, and past the server's default body limit alike.
TOO_BIG = "The file is too big to import: it may be at most 1 MB (1048576 bytes). Nothing was imported."


@pytest.mark.django_db
def test_a_file_larger_than_the_server_takes_is_said_beside_the_form_with_the_limit(owner, settings):
    add(owner, "home", "lives in Rome")
    before = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    client = signed_in(owner)
    big = b"x" * (importing.ZIP_MAX_BYTES + 1)
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == importing.ZIP_MAX_BYTES  # the default: both limits at 1 MB

    # past the server's body limit: back on the tab, before anything is read, not on the generic 413 page
    part = shown(client, client.post(IMPORT, {"file": named(big, "big.zip")}, HTTP_ACCEPT="text/html",
                                     HTTP_ORIGIN="http://testserver"))
    assert re.search(r'<p class="notice error">' + re.escape(TOO_BIG), part), part[:1500]
    # a server that takes larger bodies: the largest zip says the same
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * importing.ZIP_MAX_BYTES
    assert TOO_BIG in shown(client, client.post(IMPORT, {"file": named(big, "big.zip")}))
    # one that takes less: its limit is the one named, for a file and for typed facts
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    part = shown(client, client.post(IMPORT, {"file": named(b"x" * 2000, "export.zip")}))
    assert "The file is too big to import: it may be at most 1000 bytes. Nothing was imported." in part
    typed = urlencode({"facts": "Lives in Porto\n" * 200})  # as the facts' form posts: no file, not multipart
    part = shown(client, client.post(IMPORT, typed, content_type="application/x-www-form-urlencoded"))
    assert ("The facts are too long to import: this server takes at most 1000 bytes in one form, and a list at "
            f"most {importing.FACTS_MAX_CHARS} characters. Nothing was imported.") in part
    assert nothing_written(owner, before)


@pytest.mark.django_db
def test_a_zip_as_large_as_an_import_takes_is_imported_from_the_tab(owner):
    client = signed_in(owner)
    largest = a_zip_of_exactly(importing.ZIP_MAX_BYTES, {"Memory/index.md": "- home: lives in Rome\n"})

    part = shown(client, client.post(IMPORT, {"file": named(largest, "export.zip")}))

    assert "too big" not in part and "notice error" not in part
    assert notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"


@pytest.mark.django_db
def test_a_body_past_the_limit_from_another_site_or_nobody_signed_in_gets_the_413_and_no_message(owner, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = signed_in(owner)

    def form():  # past the limit and the room a form's framing has beside it
        return {"file": named(b"x" * (1000 + MULTIPART_ROOM + 1), "export.zip")}

    elsewhere = client.post(IMPORT, form(), HTTP_ACCEPT="text/html", HTTP_ORIGIN="https://elsewhere.example")
    nobody = Client().post(IMPORT, form(), HTTP_ACCEPT="text/html")
    swapped = client.post(IMPORT, form(), HTTP_HX_REQUEST="true")

    for refused in (elsewhere, nobody):
        assert refused.status_code == 413 and "larger than 1000 bytes; nothing was saved" in refused.content.decode()
    assert swapped.status_code == 413 and swapped["HX-Retarget"] == "#main"
    assert "too big" not in client.get(TAB).content.decode()  # nothing was said into Alice's session
    assert nothing_written(owner)


@pytest.mark.django_db
def test_an_import_past_the_cap_is_refused_whole_and_nothing_is_half_imported(owner):
    for number in range(INDEX_MAX_LINES - 1):
        add(owner, f"t{number}", f"note {number}")
    before = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    changes = ChangeSet.objects.filter(owner=owner).count()
    client = signed_in(owner)

    part = shown(client, client.post(IMPORT, {"file": named(a_zip({
        "Memory/index.md": "- tea: green tea\n- jazz: likes jazz\n- t0: note zero\n"}), "export.zip")}))

    assert "Memory/index.md" in part and "notice error" in part
    assert nothing_written(owner, before) and ChangeSet.objects.filter(owner=owner).count() == changes


@pytest.mark.django_db
@pytest.mark.parametrize("what", ["zip", "facts"])
def test_import_is_refused_while_memory_is_off_as_the_api_refuses_it(owner, what):
    settings_update(user_id=owner.pk, enabled=False)
    client = signed_in(owner)
    assert "Memory is off, and an import writes notes" in client.get(TAB).content.decode()
    form = ({"file": named(a_zip({"Memory/index.md": "- home: lives in Rome\n"}), "export.zip")} if what == "zip"
            else {"facts": "Lives in Porto"})

    part = shown(client, client.post(IMPORT, form))

    assert "Memory is off in your settings. Turn it on under Your settings, then Memory." in part
    assert nothing_written(owner)


@pytest.mark.django_db
def test_import_needs_the_forms_csrf_token_and_a_login(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)

    assert client.post(IMPORT, {"facts": "Lives in Porto"}).status_code == 403
    assert Client().post(IMPORT, {"facts": "Lives in Porto"})["Location"].startswith("/login/")
    assert nothing_written(owner)
    page = client.get(TAB).content.decode()
    form = page[page.index('action="/settings/memory/import/"'):]
    assert 'name="csrfmiddlewaretoken"' in form[:400]


@pytest.mark.django_db
def test_another_users_import_lands_in_their_account_only_and_its_suggestions_are_theirs(
        owner, outsider, alices_export):
    alices = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    mallory = signed_in(outsider)
    add(outsider, "pets", "has a cat")

    part = shown(mallory, mallory.post(IMPORT, {"file": named(alices_export, "alice.zip")}))

    assert "Memory/home" in part and index(outsider) == "- pets: has a cat\n- home: lives in Rome\n- diet: vegetarian\n"
    assert {f.path: f.content for f in NoteFile.objects.filter(owner=owner)} == alices  # Alice's untouched
    assert not Proposal.objects.filter(owner=owner).exists()
    assert "you deleted it" not in part  # Alice's Trash is nothing to Mallory's import
    # Mallory's answer is shown to her once; Alice never sees it, and her import's suggestions are Alice's alone
    alice = signed_in(owner)
    assert "Imported:" not in alice.get(TAB).content.decode()
    shown(mallory, mallory.post(IMPORT, {"facts": "Lives in Porto"}))
    [waiting] = Proposal.objects.filter(owner=outsider)
    assert alice.post(f"/inbox/{waiting.pk}/confirm/").status_code == 404
    assert f"proposal-{waiting.pk}" not in alice.get("/inbox/").content.decode()
    assert check_invariants() == []


# --- in a browser ----------------------------------------------------------------------------------------------


@pytest.mark.browser
def test_a_person_exports_forgets_a_note_imports_the_zip_and_answers_the_note_that_waits(web, tmp_path):
    web.register("alice")
    page = web.page
    for topic, summary in (("home", "lives in Rome"), ("diet", "vegetarian")):
        page.get_by_text("Add a note", exact=True).first.click()
        page.get_by_label("Topic").first.fill(topic)
        page.get_by_label("What to remember (one line)").first.fill(summary)
        page.get_by_role("button", name="Save note").first.click()
        expect(page.get_by_text(f"Saved the note “{topic}”.")).to_be_visible()
    with page.expect_download() as info:
        page.get_by_role("link", name="Export").click()
    export = tmp_path / "memory-export.zip"
    export.write_bytes(Path(info.value.path()).read_bytes())
    page.locator(".notes-list li").filter(has_text="diet — vegetarian").get_by_role(
        "button", name="Delete the note diet").click()
    expect(page.get_by_test_id("note-deleted")).to_contain_text("Deleted the note “diet”.")

    page.get_by_role("link", name="Import…").click()
    page.get_by_label("Export zip").set_input_files(str(export))
    page.get_by_role("button", name="Import the zip").click()

    answer = page.get_by_test_id("import-answer")
    expect(answer).to_contain_text("Imported: 0 note(s) added, 1 waiting for your answer, 1 unchanged, 0 skipped.")
    expect(answer.get_by_test_id("import-waiting")).to_contain_text(
        "you deleted it; it is in your Trash — until")
    expect(answer).to_contain_text("A suggestion not answered by then expires, and nothing of it is saved.")
    expect(page.locator(".notes-list")).not_to_contain_text("diet")
    web.accessible("memory tab after an import")
    web.screenshot("answer")
    answer.get_by_role("link", name=re.compile("“diet”")).click()
    card = page.locator(".proposal-card").filter(has_text="Save to memory: “diet”")
    expect(card).to_contain_text("but you deleted it (it is in your Trash), so it waits for your answer")
    card.get_by_role("button", name="Save the note diet", exact=True).click()
    expect(page.locator("#announce")).to_contain_text("Saved to memory: “diet”.")
    web.go("/settings/memory/")
    expect(page.locator(".notes-list")).to_contain_text("diet — vegetarian")


@pytest.mark.browser
def test_facts_are_imported_without_javascript_and_a_refusal_keeps_them_in_the_form(new_web):
    web = new_web(javascript=False)
    web.register("alice")
    page = web.page
    web.go("/settings/memory/#import")
    facts = page.get_by_label("Facts, one a line")
    facts.fill('{"memories": [{"text": "likes tea"}]}')
    page.get_by_role("button", name="Import the facts").click()

    expect(page.locator("#import .notice.error")).to_have_text(importing.NOT_FACTS_BUT_JSON)
    expect(page.get_by_label("Facts, one a line")).to_have_value('{"memories": [{"text": "likes tea"}]}')
    web.screenshot("refused")
    page.get_by_label("Facts, one a line").fill("- Likes green tea\n- Plays the violin")
    page.get_by_role("button", name="Import the facts").click()

    waiting = page.get_by_test_id("import-waiting")
    expect(waiting.get_by_role("link")).to_have_count(2)
    expect(waiting).to_contain_text("“likes-green-tea”")
    expect(page.get_by_label("Facts, one a line")).to_have_value("")
    waiting.get_by_role("link", name=re.compile("“plays-violin”")).click()
    expect(page.get_by_role("heading", name="Save to memory: “plays-violin”")).to_be_visible()


@pytest.mark.browser
@pytest.mark.parametrize("javascript", [True, False], ids=["with-javascript", "without-javascript"])
def test_a_zip_too_big_for_the_server_is_said_beside_the_form_and_nothing_is_imported(new_web, javascript):
    web = new_web(javascript=javascript)
    web.register("alice")
    page = web.page
    web.go("/settings/memory/#import")
    page.get_by_label("Export zip").set_input_files(files=[{
        "name": "memory-export.zip", "mimeType": "application/zip", "buffer": b"x" * (importing.ZIP_MAX_BYTES + 10)}])

    page.get_by_role("button", name="Import the zip").click()

    expect(page.locator("#import .notice.error")).to_have_text(TOO_BIG)
    assert page.url.endswith("/settings/memory/#import")
    expect(page.get_by_role("button", name="Import the zip")).to_be_visible()  # the form, to try another file
    if javascript:  # axe runs in the page's JavaScript
        web.accessible("memory tab, an import too big")
    web.screenshot("too-big")


@pytest.mark.browser
def test_facts_too_long_for_the_server_are_said_beside_the_form_and_typed_again(web, settings):
    """The server's body limit refuses the facts before they are read, so the tab cannot type them again
    itself: the tab's copy of what was typed (``drafts.js``) must come back, not be dropped as sent."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2000
    web.register("alice")
    page = web.page
    web.go("/settings/memory/#import")
    typed = "\n".join(f"Fact number {n} about the garden" for n in range(100))
    page.get_by_label("Facts, one a line").fill(typed)

    page.get_by_role("button", name="Import the facts").click()

    expect(page.locator("#import .notice.error")).to_contain_text("The facts are too long to import: this server "
                                                                   "takes at most 1.95 KB (2000 bytes) in one form")
    expect(page.get_by_label("Facts, one a line")).to_have_value(typed)
    page.reload()  # shown again once: from then on what the box holds is the draft, as for any other
    expect(page.get_by_label("Facts, one a line")).to_have_value(typed)
