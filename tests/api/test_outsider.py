"""A second user gets a 404 for every route aimed at Alice's notes, versions, Trash entries and change sets,
and sees none of them in any listing. Alice's files are exactly as they were afterwards."""

from __future__ import annotations

import io
import json
import zipfile
from urllib.parse import urlencode

import pytest

from localai_memory.notes.models import ChangeSet, FileVersion, NoteFile, TrashEntry

from .conftest import assert_error


def q(path: str, **extra: object) -> str:
    return urlencode({"path": path, **extra})


# (method, url template, JSON body); {change}/{trash} are Alice's ids.
AIMED_AT_ALICE = [
    ("GET", "/api/files/content?" + q("Memory/home.md"), None),
    ("GET", "/api/files/content?" + q("Memory/agents/7/index.md"), None),
    ("PUT", "/api/files/content?" + q("Memory/home.md"), {"content": "mallory was here", "version": 1}),
    ("PUT", "/api/files/content?" + q("Memory/index.md"), {"content": "- x: y\n", "version": 2}),
    ("DELETE", "/api/files/content?" + q("Memory/home.md"), None),
    ("DELETE", "/api/files/content?" + q("Memory/home.md", version=1), None),
    ("GET", "/api/files/history?" + q("Memory/home.md"), None),
    ("GET", "/api/files/history?" + q("Memory/scratch.md"), None),
    ("POST", "/api/files/history/restore", {"path": "Memory/home.md", "version": 1}),
    ("POST", "/api/files/history/restore", {"path": "Memory/scratch.md", "version": 1}),
    ("POST", "/api/files/trash/{trash}/restore", None),
    ("POST", "/api/chats/changes/{change}/undo", None),
]


def alices_state(owner) -> tuple:
    return (sorted(NoteFile.objects.filter(owner=owner).values_list("path", "content", "version")),
            ChangeSet.objects.filter(owner=owner).count(), FileVersion.objects.filter(owner=owner).count(),
            sorted(TrashEntry.objects.filter(owner=owner).values_list("pk", "restored_at")))


@pytest.mark.parametrize("method,url,body", AIMED_AT_ALICE,
                         ids=[f"{m} {u.split('?')[0]} {i}" for i, (m, u, _) in enumerate(AIMED_AT_ALICE)])
def test_an_outsider_gets_404_on_alices_things(outsider_api, owner, alices_notes, method, url, body):
    before = alices_state(owner)
    url = url.format(change=alices_notes["change_id"], trash=alices_notes["trash_id"])
    response = outsider_api.generic(method, url, b"" if body is None else json.dumps(body),
                                    content_type="application/json")
    error = assert_error(response, 404)
    assert "Rome" not in str(error) and "mallory" not in str(error)
    assert alices_state(owner) == before


def test_alice_herself_reaches_the_same_things(api, owner, alices_notes):
    """The other side of the 404s: the same routes work for the owner, so the 404 is about ownership."""
    assert api.get("/api/files/content?" + q("Memory/home.md")).status_code == 200
    assert api.get("/api/files/history?" + q("Memory/scratch.md")).status_code == 200
    assert api.post(f"/api/files/trash/{alices_notes['trash_id']}/restore").status_code == 200
    latest = ChangeSet.objects.filter(owner=owner).first()
    assert api.post(f"/api/chats/changes/{latest.pk}/undo").status_code == 200


def test_an_outsider_sees_none_of_alices_things_in_any_listing(outsider_api, owner, alices_notes):
    assert outsider_api.get("/api/files").json()["files"] == []
    assert outsider_api.get("/api/files", {"path": "Memory/agents/7"}).json()["files"] == []
    assert outsider_api.get("/api/files/trash").json()["entries"] == []
    assert outsider_api.get("/api/chats/changes/audit").json()["changes"] == []
    export = outsider_api.get("/api/chats/memory/export")
    assert zipfile.ZipFile(io.BytesIO(export.content)).namelist() == []
    scopes = outsider_api.get("/api/chats/memory/notes").json()["scopes"]
    assert all(scope["index"] == [] and scope["files"] == [] for scope in scopes)
    assert [scope["kind"] for scope in scopes] == ["user"]


def test_an_outsiders_forget_leaves_alice_alone(outsider_api, owner, alices_notes):
    before = alices_state(owner)
    response = outsider_api.post("/api/chats/memory/forget", {"confirm": True}, format="json")
    assert response.status_code == 200 and response.json()["files"] == 0
    assert alices_state(owner) == before


def test_an_outsider_writing_the_same_path_gets_a_file_of_their_own(outsider_api, outsider, owner, alices_notes):
    before = alices_state(owner)
    response = outsider_api.put("/api/files/content?" + q("Memory/home.md"), {"content": "mine"}, format="json")
    assert response.status_code == 200
    assert NoteFile.objects.get(owner=outsider, path="Memory/home.md").content == "mine"
    assert alices_state(owner) == before
    # and Alice's change id is still a 404 for the outsider even though the outsider now has changes too
    assert_error(outsider_api.post(f"/api/chats/changes/{alices_notes['change_id']}/undo"), 404)


def test_nobody_makes_notes_in_a_folder_of_anothers_agent_or_bot(api, outsider_api, owner, outsider):
    """Alice's agent and bot: Mallory gets a 404 creating a file or a note in their folders (a folder of her
    own by that name would show in her listing as a note nobody could manage); Alice herself may."""
    from bridges.models import Binding
    from localai_memory.agents.services import agent_create

    agent = agent_create(owner_id=owner.pk, name="Chef")
    bot = Binding.objects.create(owner=owner, platform="telegram", name="Home bot", mode="polling")
    folders = {"agent": (f"Memory/agents/{agent.pk}", f"agent:{agent.pk}"),
               "bot": (f"Memory/channels/{bot.pk}-abcdef123456", f"channel:{bot.pk}-abcdef123456")}
    for root, scope in folders.values():
        assert_error(outsider_api.put("/api/files/content?" + q(f"{root}/index.md"), {"content": "- x: y\n"},
                                      format="json"), 404)
        assert_error(outsider_api.put("/api/chats/memory/notes", {"topic": "x", "summary": "y", "scope": scope},
                                      format="json"), 404)
        assert not NoteFile.objects.filter(owner=outsider).exists()
        assert api.put("/api/files/content?" + q(f"{root}/x.md"), {"content": "mine"},
                       format="json").status_code == 200
        assert api.put("/api/chats/memory/notes", {"topic": "y", "summary": "mine too", "scope": scope},
                       format="json").status_code == 200
    # The id written otherwise ("07") names a folder no chat of the agent reads: nobody's.
    assert_error(api.put("/api/chats/memory/notes", {"topic": "x", "summary": "y", "scope": f"agent:0{agent.pk}"},
                         format="json"), 404)
    assert_error(api.put("/api/chats/memory/notes", {"topic": "x", "summary": "y",
                                                     "scope": f"channel:0{bot.pk}-abcdef123456"}, format="json"), 404)
    # Nor through the Files page's New file form.
    from django.test import Client

    page = Client()
    page.force_login(outsider)
    page.post("/files/new/", {"path": f"agents/{agent.pk}/x.md", "content": "mallory was here"})
    assert not NoteFile.objects.filter(owner=outsider).exists()
    # A bot that does not exist is nobody's folder either.
    assert_error(api.put("/api/chats/memory/notes", {"topic": "x", "summary": "y",
                                                     "scope": "channel:999999-deadbeefdeadbeef"}, format="json"), 404)
