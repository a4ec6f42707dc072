"""The provider slot: Built-in, Off and the test suite's own ``sample`` add-on (tests/addons)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.chats.helpers import model  # noqa: F401 - the loopback model fixture

from .conftest import assert_error, put_json

MEMORY = "/api/chats/memory"
PROVIDERS = "/api/chats/providers"
PICK = "/api/chats/providers/memory"


def memory_slot(api) -> dict:
    response = api.get(PROVIDERS)
    assert response.status_code == 200
    return response.json()["slots"]["memory"]


def test_the_providers_are_builtin_off_and_the_installed_addon(api, monkeypatch):
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    slot = memory_slot(api)
    assert slot["current"] == "builtin"
    assert [(p["name"], p["label"], p["kind"]) for p in slot["providers"]] == [
        ("builtin", "Built-in", "builtin"), ("off", "Off", "off"), ("sample", "Sample memory add-on", "addon")]
    assert all(p["running"] for p in slot["providers"])


def test_outside_the_test_suite_the_sample_addon_is_never_offered(api, owner, monkeypatch):
    """``make run`` serves from the virtualenv the tests installed the sample add-on into; it keeps notes in
    one process's memory, so a person who picked it would lose them. Without the suite's switch neither the
    API nor the Memory tab offers it, and it cannot be picked."""
    monkeypatch.delenv("SAMPLE_PROVIDER_ENABLED", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    assert [p["name"] for p in memory_slot(api)["providers"]] == ["builtin", "off"]
    browser = Client()
    browser.force_login(owner)
    tab = browser.get("/settings/memory/")
    assert tab.status_code == 200
    assert 'value="sample"' not in tab.content.decode() and "Sample memory add-on" not in tab.content.decode()
    assert_error(put_json(api, PICK, {"provider": "sample"}), 400)


def test_a_stopped_addon_is_listed_as_not_running(api, monkeypatch):
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    sample = next(p for p in memory_slot(api)["providers"] if p["name"] == "sample")
    assert sample["running"] is False


def test_picking_off_is_the_same_as_turning_the_switch_off(api):
    response = put_json(api, PICK, {"provider": "off"})
    assert response.status_code == 200
    settings = api.get(MEMORY).json()
    assert (settings["enabled"], settings["enabled_set"], settings["provider"], settings["available"]) == \
        (False, True, "off", False)
    assert memory_slot(api)["current"] == "off"


def test_turning_the_switch_off_shows_provider_off(api):
    put_json(api, MEMORY, {"enabled": False})
    assert memory_slot(api)["current"] == "off"
    assert api.get(MEMORY).json()["provider"] == "off"


def test_picking_builtin_after_off_turns_memory_back_on(api):
    put_json(api, PICK, {"provider": "off"})
    response = put_json(api, PICK, {"provider": "builtin"})
    assert response.status_code == 200
    assert response.json()["enabled"] is True
    assert api.get(MEMORY).json()["provider"] == "builtin"


def test_turning_the_switch_on_again_brings_back_the_chosen_addon(api, monkeypatch):
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    put_json(api, PICK, {"provider": "sample"})
    put_json(api, MEMORY, {"enabled": False})
    assert api.get(MEMORY).json()["provider"] == "off"
    put_json(api, MEMORY, {"enabled": True})
    assert api.get(MEMORY).json()["provider"] == "sample"


def test_the_sample_addon_can_be_picked_and_serves(api, monkeypatch):
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    response = put_json(api, PICK, {"provider": "sample"})
    assert response.status_code == 200
    settings = api.get(MEMORY).json()
    assert (settings["enabled"], settings["provider"], settings["available"]) == (True, "sample", True)
    assert "unavailable" not in settings
    slot = memory_slot(api)
    assert (slot["current"], slot["chosen"], slot["available"]) == ("sample", "sample", True)


def test_when_the_addon_stops_memory_is_off_and_names_it_without_falling_back(api, monkeypatch):
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    put_json(api, PICK, {"provider": "sample"})
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    settings = api.get(MEMORY).json()
    assert settings["available"] is False
    assert settings["provider"] == "sample"
    assert settings["unavailable"]["code"] == "memory_provider_unavailable"
    assert settings["unavailable"]["provider"] == "sample"
    assert "sample" in settings["unavailable"]["message"]
    slot = memory_slot(api)
    assert slot["current"] != "builtin" and slot["available"] is False
    # the other settings are kept and a PUT does not move it to Built-in either
    put_json(api, MEMORY, {"save_mode": "auto"})
    settings = api.get(MEMORY).json()
    assert (settings["provider"], settings["available"]) == ("sample", False)


def test_the_addon_serves_again_once_it_runs(api, monkeypatch):
    put_json(api, PICK, {"provider": "sample"})
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    assert api.get(MEMORY).json()["available"] is False
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN")
    settings = api.get(MEMORY).json()
    assert (settings["provider"], settings["available"]) == ("sample", True)


def test_picking_builtin_while_the_addon_is_down_brings_memory_back(api, monkeypatch):
    put_json(api, PICK, {"provider": "sample"})
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    put_json(api, PICK, {"provider": "builtin"})
    settings = api.get(MEMORY).json()
    assert (settings["provider"], settings["available"]) == ("builtin", True)
    assert "unavailable" not in settings


@pytest.mark.parametrize("body", [{"provider": "nonexistent"}, {"provider": ""}, {"provider": None},
                                  {"provider": 1}, {"provider": ["sample"]}, {}, {"provider": "off", "x": 1},
                                  {"provider": "Builtin"}, {"provider": "x" * 101}, {"provider": "sam\x00ple"}])
def test_a_provider_that_is_not_installed_or_not_text_is_a_400(api, body):
    assert_error(put_json(api, PICK, body), 400)
    assert api.get(MEMORY).json()["provider"] == "builtin"


def test_an_unknown_slot_is_refused(api):
    assert_json = put_json(api, "/api/chats/providers/tools", {"provider": "builtin"})
    assert 400 <= assert_json.status_code < 500
    assert_error(assert_json, assert_json.status_code)


def test_memory_the_old_addons_name_is_an_alias_of_builtin_and_stays_harmless(api):
    put_json(api, PICK, {"provider": "off"})
    response = put_json(api, PICK, {"provider": "memory"})
    assert response.status_code == 200
    settings = api.get(MEMORY).json()
    assert (settings["enabled"], settings["provider"], settings["available"]) == (True, "builtin", True)
    assert memory_slot(api)["current"] == "builtin"
    assert "memory" not in [p["name"] for p in memory_slot(api)["providers"]]


@pytest.mark.django_db
def test_a_stored_choice_of_the_old_memory_addon_serves_as_builtin(api, owner):
    from localai_memory.memory.models import MemorySettings

    MemorySettings.objects.update_or_create(user=owner, defaults={"provider": "memory", "enabled": True})
    settings = api.get(MEMORY).json()
    assert (settings["enabled"], settings["provider"], settings["available"]) == (True, "builtin", True)


@pytest.fixture
def sample_serves(owner, monkeypatch):
    import sample_memory_provider

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN", raising=False)
    store = {"garden": "grows tomatoes"}
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, store)
    return store


def test_export_carries_the_serving_addons_own_export_and_an_import_leaves_it_to_the_addon(
        api, owner, sample_serves, make_user, client_for):
    import io
    import zipfile

    from localai_memory.notes.paths import Scope
    from localai_memory.notes.services import note_upsert

    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files",
                actor="you")
    put_json(api, PICK, {"provider": "sample"})
    body = api.get("/api/chats/memory/export").content
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert sorted(archive.namelist()) == ["Memory/index.md", "addons/sample/notes.txt"]
        assert archive.read("addons/sample/notes.txt") == b"garden: grows tomatoes\n"
    newcomer = client_for(make_user("newcomer"))
    imported = newcomer.post("/api/chats/memory/import", {"file": io.BytesIO(body)}, format="multipart")
    assert imported.status_code == 200, imported.content
    assert newcomer.get("/api/files/content", {"path": "Memory/index.md"}).json()["content"] == "- home: lives in Rome\n"


def test_export_says_so_when_the_addon_cannot_export(api, owner, sample_serves, monkeypatch):
    import io
    import zipfile

    put_json(api, PICK, {"provider": "sample"})
    monkeypatch.setenv("SAMPLE_PROVIDER_BROKEN", "1")
    with zipfile.ZipFile(io.BytesIO(api.get("/api/chats/memory/export").content)) as archive:
        assert archive.namelist() == ["addons/sample/EXPORT-FAILED.txt"]


def forget(api) -> dict:
    answer = api.post("/api/chats/memory/forget", {"confirm": True}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_forget_everything_asks_the_serving_addon_to_forget_too(api, owner, sample_serves):
    put_json(api, PICK, {"provider": "sample"})
    answer = forget(api)
    assert answer["addon"] == "forgot"
    assert [(a["name"], a["status"]) for a in answer["addons"]] == [("sample", "forgot")]
    assert sample_serves == {}


@pytest.mark.django_db
def test_a_user_who_never_picked_an_addon_has_none_asked_and_none_exported(api, owner, sample_serves):
    import io
    import zipfile

    assert (forget(api)["addon"], forget(api)["addons"]) == (None, [])
    with zipfile.ZipFile(io.BytesIO(api.get("/api/chats/memory/export").content)) as archive:
        assert not any(name.startswith("addons/") for name in archive.namelist())


def test_forget_everything_asks_an_addon_you_switched_away_from_so_its_note_does_not_come_back(
        api, owner, sample_serves, model):  # noqa: F811
    put_json(api, PICK, {"provider": "sample"})
    put_json(api, PICK, {"provider": "builtin"})  # the add-on still holds the garden note

    answer = forget(api)

    assert answer["addon"] == "forgot" and answer["addons"][0]["status"] == "forgot"
    assert sample_serves == {}
    assert forget(api)["addons"] == []  # it forgot and serves no more: nothing of yours is left in it
    put_json(api, PICK, {"provider": "sample"})
    model.script("Hello.")
    chat = api.post("/api/chats", {}, format="json").json()["id"]
    api.post(f"/api/chats/{chat}/messages", {"content": "What do I grow?"}, format="json")
    assert "tomatoes" not in model.last_request["messages"][0]["content"]


def test_forget_everything_says_when_an_addon_you_used_is_not_running_rather_than_claim_it_forgot(
        api, client, owner, sample_serves, monkeypatch):
    put_json(api, PICK, {"provider": "sample"})
    put_json(api, PICK, {"provider": "builtin"})
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")

    answer = forget(api)

    assert answer["addon"] == "failed"
    [said] = answer["addons"]
    assert (said["name"], said["status"]) == ("sample", "not_running")
    assert "is not running, so it was not asked to forget your notes" in said["message"]
    assert sample_serves == {"garden": "grows tomatoes"}
    client.force_login(owner)
    page = client.post("/settings/memory/forget/", follow=True).content.decode()
    assert "Sample memory add-on is not running" in page
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN")
    assert forget(api)["addon"] == "forgot" and sample_serves == {}  # asked again once it runs


def test_export_carries_the_notes_of_an_addon_you_switched_away_from_and_says_when_it_is_down(
        api, owner, sample_serves, monkeypatch):
    import io
    import zipfile

    put_json(api, PICK, {"provider": "sample"})
    put_json(api, PICK, {"provider": "builtin"})
    with zipfile.ZipFile(io.BytesIO(api.get("/api/chats/memory/export").content)) as archive:
        assert archive.read("addons/sample/notes.txt") == b"garden: grows tomatoes\n"
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    with zipfile.ZipFile(io.BytesIO(api.get("/api/chats/memory/export").content)) as archive:
        assert archive.namelist() == ["addons/sample/EXPORT-FAILED.txt"]
        assert b"is not running, so its notes are not in this export" in archive.read(
            "addons/sample/EXPORT-FAILED.txt")


@pytest.mark.django_db
def test_an_addon_that_was_picked_and_then_uninstalled_turns_memory_off_and_is_named(api, owner, model):  # noqa: F811
    from localai_memory.memory.models import MemorySettings

    # The choice stays in the settings row; the package that served it is gone from the machine.
    MemorySettings.objects.update_or_create(user=owner, defaults={"provider": "uninstalled-addon", "enabled": True})

    settings = api.get(MEMORY).json()
    assert (settings["available"], settings["provider"]) == (False, "uninstalled-addon")
    assert settings["unavailable"]["code"] == "memory_provider_unavailable"
    assert "uninstalled-addon" in settings["unavailable"]["message"]
    chat = api.post("/api/chats", {}, format="json").json()["id"]
    body = api.post(f"/api/chats/{chat}/messages", {"content": "Remember that I am vegan."}, format="json").json()
    assert body["memory"]["on"] is False and body["memory"]["code"] == "memory_provider_unavailable"
    assert "tools" not in model.last_request  # it never falls back to the built-in notes by itself


def provider_menu(client, owner, provider: str) -> str:
    """The Memory tab's provider menu for a user whose settings name ``provider``."""
    from localai_memory.memory.models import MemorySettings

    MemorySettings.objects.update_or_create(user=owner, defaults={"provider": provider, "enabled": True})
    client.force_login(owner)
    page = client.get("/settings/memory/").content.decode()
    return page[page.index('id="id_provider"'):page.index("</select>", page.index('id="id_provider"'))]


@pytest.mark.django_db
def test_the_memory_tab_keeps_an_uninstalled_addon_selected_and_says_so(client, owner):
    menu = provider_menu(client, owner, "uninstalled-addon")

    assert '<option value="uninstalled-addon" selected>uninstalled-addon (not installed)</option>' in menu
    assert menu.count(" selected") == 1  # not Built-in, which does not serve


@pytest.mark.django_db
def test_the_memory_tab_shows_the_old_memory_addons_name_as_built_in(client, owner):
    menu = provider_menu(client, owner, "memory")

    assert '<option value="builtin" selected>Built-in</option>' in menu and "not installed" not in menu
