"""Deleting an agent and what happens to its own notes: keep, export then delete, or delete."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from localai_memory.agents.models import Agent
from localai_memory.notes.models import NoteFile, TrashEntry

pytestmark = pytest.mark.django_db

AGENTS = "/api/chats/agents"


def agent_files(user, agent_id: int) -> list[str]:
    return sorted(NoteFile.objects.filter(owner=user, path__startswith=f"Memory/agents/{agent_id}/")
                  .values_list("path", flat=True))


def test_without_a_choice_the_notes_of_a_deleted_agent_are_kept_as_the_default(api, owner, make_agent, give_notes):
    agent = make_agent()
    give_notes(owner, agent["id"], "home")
    response = api.delete(f"{AGENTS}/{agent['id']}")
    assert response.status_code == 200
    assert response.json()["memory"] == "keep"
    assert not Agent.objects.filter(pk=agent["id"]).exists()
    assert len(agent_files(owner, agent["id"])) == 2
    listing = api.get("/api/chats/memory/notes").json()["scopes"]
    assert any(s["key"] == str(agent["id"]) and s["deleted_agent"] for s in listing)


def test_an_unknown_choice_is_a_400_and_deletes_nothing(api, owner, make_agent, give_notes):
    agent = make_agent()
    give_notes(owner, agent["id"])
    response = api.delete(f"{AGENTS}/{agent['id']}?memory=shred")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_memory_choice"
    assert Agent.objects.filter(pk=agent["id"]).exists()


@pytest.mark.parametrize("query", ["memory=keep&memory=delete", "memory=delete&memory=keep",
                                   "memory=delete&memory=delete", "memory=export&memory="])
def test_a_memory_choice_given_twice_is_a_400_that_says_so_and_deletes_nothing(api, owner, make_agent, give_notes,
                                                                               query):
    """The last value was taken: ``?memory=keep&memory=delete`` sent the notes to the Trash."""
    agent = make_agent()
    give_notes(owner, agent["id"], "home")

    response = api.delete(f"{AGENTS}/{agent['id']}?{query}")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "repeated_parameter"
    assert error["message"].startswith("the query parameter 'memory' is given 2 times (")
    assert Agent.objects.filter(pk=agent["id"]).exists()
    assert len(agent_files(owner, agent["id"])) == 2
    assert not TrashEntry.objects.filter(owner=owner).exists()


def test_a_memory_choice_sent_in_the_body_is_a_400_that_says_where_it_goes_and_deletes_nothing(
        api, owner, make_agent, give_notes):
    """Read as no choice, ``{"memory": "delete"}`` in the body kept the notes and deleted the agent silently."""
    agent = make_agent()
    give_notes(owner, agent["id"], "home")

    response = api.delete(f"{AGENTS}/{agent['id']}", data=json.dumps({"memory": "delete"}),
                          content_type="application/json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "memory_in_body" and "?memory=keep" in error["message"]
    assert Agent.objects.filter(pk=agent["id"]).exists()
    assert len(agent_files(owner, agent["id"])) == 2


def test_an_agent_without_notes_is_deleted_without_a_choice(api, make_agent):
    agent = make_agent()
    response = api.delete(f"{AGENTS}/{agent['id']}")
    assert response.status_code == 200
    assert response.json()["memory"] == "none" and response.json()["files"] == 0
    assert not Agent.objects.filter(pk=agent["id"]).exists()
    assert api.get(f"{AGENTS}/{agent['id']}").status_code == 404


def test_keep_leaves_the_notes_and_the_memory_tab_lists_them_under_deleted_agents(api, owner, make_agent,
                                                                                   give_notes):
    agent = make_agent(name="Gardener")
    give_notes(owner, agent["id"], "roses", "soil")
    before = agent_files(owner, agent["id"])

    response = api.delete(f"{AGENTS}/{agent['id']}?memory=keep")

    assert response.status_code == 200
    assert response.json()["memory"] == "keep" and response.json()["trash_id"] is None
    assert "Deleted agents" in response.json()["message"]
    assert not Agent.objects.filter(pk=agent["id"]).exists()
    assert agent_files(owner, agent["id"]) == before
    assert not TrashEntry.objects.filter(owner=owner).exists()
    scopes = api.get("/api/chats/memory/notes").json()["scopes"]
    kept = next(s for s in scopes if s["kind"] == "agent" and s["key"] == str(agent["id"]))
    assert kept["deleted_agent"] is True and kept["label"] == "Gardener"  # still says whose they were
    assert [e["topic"] for e in kept["index"]] == ["roses", "soil"]


def test_kept_notes_list_under_deleted_agents_until_they_are_deleted_on_the_memory_tab(api, client, owner, make_agent,
                                                                                      give_notes):
    """"Kept notes show on the Memory tab under Deleted agents until you delete them": its Delete these notes
    moves them to the Trash and the tab lists them no more; restored from the Trash, they list again."""
    agent = make_agent(name="Gardener")
    give_notes(owner, agent["id"], "roses")
    api.delete(f"{AGENTS}/{agent['id']}?memory=keep")

    def deleted_agents() -> list[str]:
        return [s["label"] for s in api.get("/api/chats/memory/notes").json()["scopes"] if s["deleted_agent"]]

    client.force_login(owner)
    assert "Deleted agent “Gardener”" in client.get("/settings/memory/?tab=deleted").content.decode()
    assert deleted_agents() == ["Gardener"]

    client.post("/settings/memory/folder/delete/", {"folder": f"Memory/agents/{agent['id']}"})
    assert deleted_agents() == []
    assert "Deleted agent “Gardener”" not in client.get("/settings/memory/?tab=deleted").content.decode()
    assert agent_files(owner, agent["id"]) == []
    entry = TrashEntry.objects.get(owner=owner)
    assert entry.label == "Notes of the deleted agent Gardener"

    assert api.post(f"/api/files/trash/{entry.pk}/restore", format="json").status_code == 200
    assert deleted_agents() == ["Gardener"]


def test_delete_moves_the_notes_to_the_trash_where_they_can_be_restored(api, owner, make_agent, give_notes):
    agent = make_agent()
    give_notes(owner, agent["id"], "home")
    mine = make_agent(name="Other")
    give_notes(owner, mine["id"], "keepme")

    response = api.delete(f"{AGENTS}/{agent['id']}?memory=delete")

    assert response.status_code == 200
    assert response.json()["memory"] == "delete" and response.json()["files"] == 2
    assert agent_files(owner, agent["id"]) == []
    assert len(agent_files(owner, mine["id"])) == 2  # another agent's notes are untouched
    entry = TrashEntry.objects.get(pk=response.json()["trash_id"])
    assert entry.kind == "agent"
    assert sorted(f.path for f in entry.files.all()) == [f"Memory/agents/{agent['id']}/home.md",
                                                          f"Memory/agents/{agent['id']}/index.md"]
    restored = api.post(f"/api/files/trash/{entry.pk}/restore")
    assert restored.status_code == 200, restored.content
    assert len(agent_files(owner, agent["id"])) == 2


def test_export_answers_with_a_zip_of_the_notes_and_then_moves_them_to_the_trash(api, owner, make_agent,
                                                                                  give_notes):
    agent = make_agent(name="Cook")
    give_notes(owner, agent["id"], "diet")
    expected = {f.path: f.content for f in NoteFile.objects.filter(owner=owner)}

    response = api.delete(f"{AGENTS}/{agent['id']}?memory=export")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == f'attachment; filename="agent-{agent["id"]}-cook-notes.zip"'
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        files = {name: archive.read(name).decode() for name in archive.namelist()}
    # the notes, and whose they were: an import of the zip finds the agent of that name (in this account, the
    # notes kept from it)
    record = json.loads(files.pop("folders.json"))
    assert record == {"account": record["account"], "folders": [{"folder": f"Memory/agents/{agent['id']}",
                                                                 "agent": "Cook"}]}
    assert files == expected
    assert agent_files(owner, agent["id"]) == []
    assert TrashEntry.objects.filter(owner=owner, kind="agent").count() == 1
    assert not Agent.objects.filter(pk=agent["id"]).exists()


def test_export_leaves_my_own_notes_out_of_the_zip_and_in_place(api, owner, make_agent, give_notes):
    from localai_memory.notes import services as notes_services
    from localai_memory.notes.paths import Scope

    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files")
    agent = make_agent()
    give_notes(owner, agent["id"], "diet")
    response = api.delete(f"{AGENTS}/{agent['id']}?memory=export")
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert all(name.startswith(f"Memory/agents/{agent['id']}/") for name in archive.namelist()
                   if name != "folders.json")
    assert NoteFile.objects.filter(owner=owner, path="Memory/index.md").exists()


def test_export_of_an_agent_without_notes_is_an_empty_zip(api, make_agent):
    agent = make_agent()
    response = api.delete(f"{AGENTS}/{agent['id']}?memory=export")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.namelist() == []
    assert not Agent.objects.filter(pk=agent["id"]).exists()


def test_another_user_cannot_delete_my_agent_or_touch_its_notes(api, owner, outsider_api, make_agent,
                                                                give_notes):
    agent = make_agent()
    give_notes(owner, agent["id"])
    for choice in ("", "?memory=keep", "?memory=export", "?memory=delete"):
        assert outsider_api.delete(f"{AGENTS}/{agent['id']}{choice}").status_code == 404
    assert Agent.objects.filter(pk=agent["id"]).exists()
    assert len(agent_files(owner, agent["id"])) == 2


def test_a_suggestion_waiting_for_a_deleted_agents_notes_is_dropped_and_cannot_bring_its_folder_back(
        api, owner, make_agent, give_notes):
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import proposal_create
    from localai_memory.notes.paths import Scope

    agent = make_agent()
    give_notes(owner, agent["id"], "home")
    waiting = proposal_create(owner_id=owner.pk, scope=Scope.agent(agent["id"]), topic="diet", summary="vegan")
    mine = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegan")

    assert api.delete(f"{AGENTS}/{agent['id']}?memory=delete").status_code == 200

    waiting.refresh_from_db()
    assert waiting.status == "expired" and waiting.decided_by == "the agent was deleted"
    assert waiting.notified  # not announced as "nobody answered within 24 hours"
    assert Proposal.objects.get(pk=mine.pk).status == "pending"  # the owner's own are untouched
    confirm = api.post(f"/api/chats/memory/proposals/{waiting.pk}/confirm")
    assert confirm.status_code == 410 and confirm.json()["error"]["code"] == "agent_deleted"
    assert "agent was deleted" in confirm.json()["error"]["message"]
    assert agent_files(owner, agent["id"]) == []


def test_agents_deleted_before_names_were_kept_get_theirs_from_their_trash_entry(api, owner, make_agent, give_notes):
    """Migration agents.0004 reads the name of an agent whose notes went to the Trash with it."""
    import importlib

    from django.apps import apps

    from localai_memory.agents.models import DeletedAgent

    backfill = importlib.import_module("localai_memory.agents.migrations.0004_deleted_agent_names_from_trash")
    agent = make_agent(name="Tutor")
    give_notes(owner, agent["id"], "maths")
    api.delete(f"{AGENTS}/{agent['id']}?memory=delete")
    DeletedAgent.objects.all().delete()  # as before names were kept

    backfill.names_from_trash(apps, None)

    assert DeletedAgent.objects.get(owner=owner, agent_id=agent["id"]).name == "Tutor"


@pytest.fixture
def sample_addon(owner, monkeypatch):
    """The sample memory add-on (it keeps notes per namespace) picked and running, with stores of its own."""
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    for name in ("SAMPLE_PROVIDER_DOWN", "SAMPLE_PROVIDER_BROKEN", "SAMPLE_PROVIDER_ONE_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sample_memory_provider.NOTES, owner.pk, {"kite": "flies a red kite"})
    monkeypatch.setattr(sample_memory_provider, "SCOPED", {})
    provider_pick(user_id=owner.pk, provider="sample")
    return sample_memory_provider


def test_deleting_an_agent_asks_the_memory_addon_to_drop_the_agents_notes(api, owner, make_agent, sample_addon):
    """No chat reads a deleted agent's notes in the add-on; left there they would stay for good."""
    agent, other = make_agent(name="Cook"), make_agent(name="Gardener")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}
    sample_addon.SCOPED[(owner.pk, f"agent:{other['id']}")] = {"roses": "prunes roses in March"}

    response = api.delete(f"{AGENTS}/{agent['id']}?memory=delete")

    assert response.status_code == 200
    body = response.json()
    assert [(a["name"], a["status"]) for a in body["addons"]] == [("sample", "forgot")]
    assert "The memory add-on Sample memory add-on forgot the notes of the agent “Cook”." in body["message"]
    assert (owner.pk, f"agent:{agent['id']}") not in sample_addon.SCOPED
    # only that agent's: the other agent's notes and the user's own stay
    assert sample_addon.SCOPED[(owner.pk, f"agent:{other['id']}")] == {"roses": "prunes roses in March"}
    assert sample_addon.NOTES[owner.pk] == {"kite": "flies a red kite"}


def test_an_addon_that_is_not_running_is_named_when_an_agent_is_deleted(api, owner, make_agent, sample_addon,
                                                                        monkeypatch):
    agent = make_agent(name="Cook")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")

    body = api.delete(f"{AGENTS}/{agent['id']}?memory=delete").json()

    assert [(a["name"], a["status"]) for a in body["addons"]] == [("sample", "not_running")]
    assert ("The memory add-on Sample memory add-on is not running, so it was not asked to forget the notes of the "
            "agent “Cook” and may still hold them; it is listed on the Memory tab, to ask it again.") in body["message"]
    assert sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] == {"pasta": "cooks pasta on Fridays"}


ADDON_FORGETS = "/api/chats/memory/addon-forgets"


def test_an_addon_that_was_not_running_is_asked_again_for_just_that_agents_notes(api, owner, make_agent,
                                                                                 sample_addon, monkeypatch):
    """The delete keeps the request the add-on could not hear; asked again once it runs, it drops that agent's
    notes only (not the other agent's, not the user's own, as Forget everything would)."""
    agent, other = make_agent(name="Cook"), make_agent(name="Gardener")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}
    sample_addon.SCOPED[(owner.pk, f"agent:{other['id']}")] = {"roses": "prunes roses in March"}
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    api.delete(f"{AGENTS}/{agent['id']}?memory=delete")

    [waiting] = api.get(ADDON_FORGETS).json()["addon_forgets"]
    assert {k: waiting[k] for k in ("name", "label", "namespace", "whose", "status")} == {
        "name": "sample", "label": "Sample memory add-on", "namespace": f"agent:{agent['id']}",
        "whose": "the notes of the agent “Cook”", "status": "not_running"}
    still_down = api.post(f"{ADDON_FORGETS}/{waiting['id']}/ask").json()
    assert still_down["addon"]["status"] == "not_running" and still_down["addon_forget"]["id"] == waiting["id"]

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN")
    response = api.post(f"{ADDON_FORGETS}/{waiting['id']}/ask")

    assert response.status_code == 200
    assert response.json() == {"addon": {"name": "sample", "label": "Sample memory add-on", "status": "forgot",
                                         "message": "The memory add-on Sample memory add-on forgot the notes of the "
                                                    "agent “Cook”."},
                               "addon_forget": None}
    assert (owner.pk, f"agent:{agent['id']}") not in sample_addon.SCOPED
    assert sample_addon.SCOPED[(owner.pk, f"agent:{other['id']}")] == {"roses": "prunes roses in March"}
    assert sample_addon.NOTES[owner.pk] == {"kite": "flies a red kite"}
    assert api.get(ADDON_FORGETS).json() == {"addon_forgets": []}
    assert api.post(f"{ADDON_FORGETS}/{waiting['id']}/ask").status_code == 404  # settled: nothing to ask


def test_another_user_neither_sees_nor_asks_again_a_request_to_a_memory_addon(api, outsider_api, owner, make_agent,
                                                                            sample_addon, monkeypatch):
    agent = make_agent(name="Cook")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}
    monkeypatch.setenv("SAMPLE_PROVIDER_DOWN", "1")
    api.delete(f"{AGENTS}/{agent['id']}?memory=delete")
    [waiting] = api.get(ADDON_FORGETS).json()["addon_forgets"]
    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN")

    assert outsider_api.get(ADDON_FORGETS).json() == {"addon_forgets": []}
    refused = outsider_api.post(f"{ADDON_FORGETS}/{waiting['id']}/ask")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "addon_forget_not_found"
    assert api.post(f"{ADDON_FORGETS}/{10 ** 30}/ask").status_code == 404
    assert sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] == {"pasta": "cooks pasta on Fridays"}
    assert [r["id"] for r in api.get(ADDON_FORGETS).json()["addon_forgets"]] == [waiting["id"]]


def test_an_addon_that_failed_is_kept_to_ask_again_until_forget_everything_made_it_forget_all(
        api, owner, make_agent, sample_addon, monkeypatch):
    agent = make_agent(name="Cook")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}
    monkeypatch.setenv("SAMPLE_PROVIDER_BROKEN", "1")
    body = api.delete(f"{AGENTS}/{agent['id']}?memory=delete").json()
    assert ("The memory add-on Sample memory add-on could not forget the notes of the agent “Cook”; it is listed "
            "on the Memory tab, to ask it again.") in body["message"]
    assert [r["status"] for r in api.get(ADDON_FORGETS).json()["addon_forgets"]] == ["failed"]

    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN")
    forgot = api.post("/api/chats/memory/forget", {"confirm": True}, format="json").json()

    assert forgot["addon"] == "forgot"
    assert api.get(ADDON_FORGETS).json() == {"addon_forgets": []}


def test_keep_leaves_the_agents_notes_in_the_memory_addon_too(api, owner, make_agent, give_notes, sample_addon):
    agent = make_agent(name="Cook")
    give_notes(owner, agent["id"], "home")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}

    body = api.delete(f"{AGENTS}/{agent['id']}?memory=keep").json()

    assert body["addons"] == [] and body["memory"] == "keep"
    assert sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] == {"pasta": "cooks pasta on Fridays"}


def test_without_a_choice_an_agent_whose_notes_are_all_in_the_memory_addon_keeps_them_there(api, owner, make_agent,
                                                                                          sample_addon):
    """Its notes are not in the Trash: a forget in the add-on cannot be undone, so only Delete asks for it."""
    agent = make_agent(name="Cook")
    sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] = {"pasta": "cooks pasta on Fridays"}

    body = api.delete(f"{AGENTS}/{agent['id']}").json()

    assert body["addons"] == []
    assert "It had no notes" not in body["message"]  # they are in the add-on, and it keeps them
    assert "The memory add-on “Sample memory add-on” keeps any notes of the agent it holds" in body["message"]
    assert sample_addon.SCOPED[(owner.pk, f"agent:{agent['id']}")] == {"pasta": "cooks pasta on Fridays"}


def test_a_live_agents_notes_are_not_moved_to_the_trash_as_a_deleted_agents(api, owner, client, make_agent,
                                                                          give_notes):
    agent = make_agent()
    give_notes(owner, agent["id"], "home")
    client.force_login(owner)

    response = client.post("/settings/memory/folder/delete/", {"folder": f"Memory/agents/{agent['id']}"})

    assert response.status_code == 404
    assert agent_files(owner, agent["id"]) != []
    assert not TrashEntry.objects.filter(owner=owner).exists()
