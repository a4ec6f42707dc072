"""GET/PUT /api/chats/memory exactly as the spec's API section says, and the provider slot."""

from __future__ import annotations

import io
import zipfile

import pytest

from localai_memory.memory.models import MemorySettings
from localai_memory.notes.models import NoteFile

from .conftest import assert_error, post_json, put_json

URL = "/api/chats/memory"

DEFAULTS = {"enabled": True, "enabled_set": False, "save_mode": "ask", "messaging_save": "ask",
            "save_mode_set": False, "provider": "builtin", "available": True}


def test_a_new_user_reads_the_defaults(api):
    response = api.get(URL)
    assert response.status_code == 200
    assert response.json() == DEFAULTS


def test_an_empty_put_changes_nothing(api):
    response = put_json(api, URL, {})
    assert response.status_code == 200
    assert response.json() == DEFAULTS
    assert api.get(URL).json() == DEFAULTS


@pytest.mark.parametrize("save_mode", ["auto", "ask", "always", "never"])
def test_each_save_mode_sticks_and_counts_as_chosen(api, save_mode):
    response = put_json(api, URL, {"save_mode": save_mode})
    assert response.status_code == 200
    expected = {**DEFAULTS, "save_mode": save_mode, "save_mode_set": True}
    assert response.json() == expected
    assert api.get(URL).json() == expected


@pytest.mark.parametrize("messaging_save", ["ask", "paired_private", "never"])
def test_each_messaging_save_value_sticks(api, messaging_save):
    assert put_json(api, URL, {"messaging_save": messaging_save}).status_code == 200
    assert api.get(URL).json() == {**DEFAULTS, "messaging_save": messaging_save}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_switch_sticks_and_counts_as_chosen(api, enabled):
    assert put_json(api, URL, {"enabled": enabled}).status_code == 200
    body = api.get(URL).json()
    assert body["enabled"] is enabled
    assert body["enabled_set"] is True
    assert body["available"] is enabled
    assert body["provider"] == ("builtin" if enabled else "off")


def test_a_field_left_out_stays_as_it_is(api):
    put_json(api, URL, {"enabled": False, "save_mode": "never", "messaging_save": "paired_private"})
    put_json(api, URL, {"save_mode": "auto"})
    body = api.get(URL).json()
    assert (body["enabled"], body["save_mode"], body["messaging_save"]) == (False, "auto", "paired_private")
    put_json(api, URL, {"enabled": True})
    body = api.get(URL).json()
    assert (body["enabled"], body["save_mode"], body["messaging_save"]) == (True, "auto", "paired_private")


@pytest.mark.parametrize("body", [
    {"enabled": "true"}, {"enabled": 1}, {"enabled": 0}, {"enabled": "yes"}, {"enabled": None}, {"enabled": []},
    {"enabled": {}},
    {"save_mode": "sometimes"}, {"save_mode": "ASK"}, {"save_mode": " ask"}, {"save_mode": None},
    {"save_mode": ["ask"]}, {"save_mode": 1}, {"save_mode": True}, {"save_mode": ""},
    {"messaging_save": "paired"}, {"messaging_save": "auto"}, {"messaging_save": "always"},
    {"messaging_save": None}, {"messaging_save": ["ask"]}, {"messaging_save": {"x": 1}},
    {"provider": "sample"}, {"enabled_set": True}, {"available": False}, {"colour": "blue"},
])
def test_a_value_that_is_not_allowed_is_a_400_and_changes_nothing(api, body):
    put_json(api, URL, {"save_mode": "always"})
    before = api.get(URL).json()
    assert_error(put_json(api, URL, body), 400)
    assert api.get(URL).json() == before


@pytest.mark.parametrize("raw", [b"[]", b'["enabled"]', b"null", b"true", b"3", b'"ask"', b"{", b"enabled=false",
                                 b'{"enabled": NaN}', b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_a_400(api, raw):
    response = api.generic("PUT", URL, raw, content_type="application/json")
    assert_error(response, 400)
    assert api.get(URL).json() == DEFAULTS


def test_a_form_body_is_refused_as_an_unsupported_media_type(api):
    response = api.generic("PUT", URL, b"enabled=false", content_type="application/x-www-form-urlencoded")
    assert_error(response, 415)


def test_export_and_forget_work_while_memory_is_off(api, owner, alices_notes):
    put_json(api, URL, {"enabled": False})
    paths = set(NoteFile.objects.filter(owner=owner).values_list("path", flat=True))
    export = api.get("/api/chats/memory/export")
    assert export.status_code == 200
    assert set(zipfile.ZipFile(io.BytesIO(export.content)).namelist()) == paths
    forget = post_json(api, "/api/chats/memory/forget", {"confirm": True})
    assert forget.status_code == 200
    assert forget.json()["files"] == len(paths)
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_while_memory_is_off_the_notes_stay_and_can_be_read_and_edited_on_the_memory_tab(api, client, owner):
    """"Your notes stay where they are. You can still read, edit, export and delete them on the Memory tab
    while memory is off": the switch keeps notes out of chats, not out of the person's hands."""
    put_json(api, "/api/chats/memory/notes", {"topic": "home", "summary": "lives in Rome", "details": "Trastevere."})
    put_json(api, URL, {"enabled": False})

    client.force_login(owner)
    tab = client.get("/settings/memory/").content.decode()
    assert "lives in Rome" in tab
    note = client.get("/settings/memory/note/?path=Memory/home.md")
    assert note.status_code == 200 and "Trastevere." in note.content.decode()
    edited = client.post("/settings/memory/note/?path=Memory/home.md", {"content": "Monti, since May.", "version": 1})
    assert edited.status_code == 302
    added = put_json(api, "/api/chats/memory/notes", {"topic": "diet", "summary": "vegetarian"})
    assert added.status_code == 200, added.content

    index = {e["topic"]: e for e in api.get("/api/chats/memory/notes").json()["scopes"][0]["index"]}
    assert (index["home"]["summary"], index["diet"]["summary"]) == ("lives in Rome", "vegetarian")
    assert api.get("/api/files/content?path=Memory/home.md").json()["content"] == "Monti, since May."
    assert api.get(URL).json()["enabled"] is False


def test_two_users_have_their_own_settings(api, outsider_api):
    put_json(api, URL, {"enabled": False, "save_mode": "never"})
    assert outsider_api.get(URL).json() == DEFAULTS


def test_memory_starts_off_for_someone_who_had_disabled_the_old_memory_addon(api, owner):
    MemorySettings.objects.create(user=owner, legacy_addon_disabled=True)
    body = api.get(URL).json()
    assert (body["enabled"], body["enabled_set"], body["available"], body["provider"]) == (False, False, False, "off")
    put_json(api, URL, {"enabled": True})
    body = api.get(URL).json()
    assert (body["enabled"], body["enabled_set"], body["available"], body["provider"]) == (True, True, True, "builtin")


def test_the_server_files_switch_off_means_memory_is_not_available(api, settings):
    settings.FILES_ENABLED = False
    body = api.get(URL).json()
    assert (body["enabled"], body["available"]) == (True, False)
    assert body["unavailable"]["code"] == "server_files_off"


def test_with_the_server_files_off_no_surface_writes_a_note_but_forgetting_still_works(api, owner, settings):
    from localai_memory.notes.models import NoteFile
    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="pets", summary="a cat", details="Miso.",
                source="files")
    settings.FILES_ENABLED = False
    before = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}
    for response in (
        api.put("/api/chats/memory/notes", {"topic": "diet", "summary": "vegetarian"}, format="json"),
        api.post("/api/chats/memory/notes", {"summary": "vegetarian"}, format="json"),
        api.put("/api/files/content?path=Memory/b.md", {"content": "x\n"}, format="json"),
    ):
        error = assert_error(response, 403, "server_files_off")
        assert "files off" in error["message"]
    assert {f.path: f.content for f in NoteFile.objects.filter(owner=owner)} == before
    assert api.delete("/api/chats/memory/notes?topic=home").status_code == 200  # one note among others
    assert api.delete("/api/chats/memory/notes?topic=pets").status_code == 200  # its topic file goes too
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_what_get_answers_can_be_written_back_with_a_change(api):
    """A client reads the settings, changes one, and sends the whole object back: the fields PUT does not
    change are taken when they say what is so, and one that differs is a 400 naming where it is changed."""
    body = api.get(URL).json()
    body["save_mode"] = "auto"
    response = put_json(api, URL, body)
    assert response.status_code == 200, response.content
    assert response.json()["save_mode"] == "auto" and response.json()["save_mode_set"] is True
    stale = {**api.get(URL).json(), "provider": "sample", "save_mode": "never"}
    refused = assert_error(put_json(api, URL, stale), 400, "read_only_field")
    assert "PUT /api/chats/providers/memory" in refused["message"]
    assert api.get(URL).json()["save_mode"] == "auto"  # nothing written
    assert_error(put_json(api, URL, {"colour": "red"}), 400, "unknown_field")


def test_a_save_mode_that_is_none_of_the_choices_is_refused_listing_them(api, owner):
    response = put_json(api, URL, {"save_mode": "bogus"})

    assert response.status_code == 400
    message = str(response.json()["error"])
    assert '"bogus" is not a valid choice' in message and "auto, ask, always, never" in message
    assert MemorySettings.objects.filter(user=owner, save_mode="bogus").count() == 0
    assert api.get(URL).json()["save_mode"] == "ask"


def test_a_save_mode_sent_to_the_provider_route_says_where_it_is_set(api):
    response = put_json(api, "/api/chats/providers/memory", {"provider": "off", "save_mode": "never"})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unknown_field" and "PUT /api/chats/memory" in error["message"]
    assert api.get(URL).json() == DEFAULTS  # neither the provider nor the save level changed
