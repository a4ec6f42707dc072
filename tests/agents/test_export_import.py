"""Copying an agent: an export file with its memory choices, and an import that makes a new agent, no notes."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from localai_memory.agents.models import Agent
from localai_memory.notes.models import NoteFile

pytestmark = pytest.mark.django_db

AGENTS = "/api/chats/agents"


def export(api, agent_id: int):
    response = api.get(f"{AGENTS}/{agent_id}/export")
    assert response.status_code == 200, response.content
    return response


def test_the_export_is_a_json_file_with_the_memory_choices_and_a_format_marker(api, make_agent):
    agent = make_agent(name="Trip planner", instructions="Plan trips.", memory="own", memory_save="always",
                       addons=["memory"])
    response = export(api, agent["id"])
    assert response["Content-Type"].startswith("application/json")
    disposition = response["Content-Disposition"]
    assert disposition.startswith("attachment;") and f"agent-{agent['id']}-trip-planner.json" in disposition
    document = json.loads(response.content)
    assert document["format"] == "localai-memory.agent" and document["version"] == 1
    assert document["agent"] == {"name": "Trip planner", "instructions": "Plan trips.", "tools": ["memory"],
                                 "addons": ["memory"], "grants": ["memory.write"], "memory": "own",
                                 "memory_save": "always"}


def test_an_import_makes_a_new_agent_with_the_same_choices_and_none_of_the_notes(api, owner, make_agent,
                                                                                  give_notes):
    original = make_agent(name="Cook", instructions="Vegetarian meals.", memory="mine_and_own",
                          memory_save="never", tools=["memory", "web"], grants=[])
    give_notes(owner, original["id"], "diet", "allergies")
    document = json.loads(export(api, original["id"]).content)

    response = api.post(f"{AGENTS}/import", document, format="json")

    assert response.status_code == 201, response.content
    copy = response.json()
    assert copy["id"] != original["id"]
    fields = ("name", "instructions", "tools", "addons", "grants", "memory", "memory_save")
    assert {f: copy[f] for f in fields} == {f: original[f] for f in fields}
    assert not NoteFile.objects.filter(owner=owner, path__startswith=f"Memory/agents/{copy['id']}/").exists()
    assert NoteFile.objects.filter(owner=owner, path__startswith=f"Memory/agents/{original['id']}/").count() == 3
    assert Agent.objects.filter(owner=owner).count() == 2


def test_an_as_before_agent_stays_as_before_when_copied(api, make_agent):
    original = make_agent(name="Legacy", addons=["memory"])
    copy = api.post(f"{AGENTS}/import", json.loads(export(api, original["id"]).content), format="json").json()
    assert copy["memory"] is None and copy["memory_save"] is None and copy["addons"] == ["memory"]


def test_an_export_file_can_be_uploaded_as_a_file(api, make_agent):
    original = make_agent(name="Uploader", memory="mine", memory_save="always")
    upload = SimpleUploadedFile("agent.json", export(api, original["id"]).content, content_type="application/json")
    response = api.post(f"{AGENTS}/import", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.content
    assert (response.json()["memory"], response.json()["memory_save"]) == ("mine", "always")


def test_another_user_can_import_my_export_file_as_their_own_agent(api, outsider, outsider_api, make_agent):
    document = json.loads(export(api, make_agent(name="Shared", memory="own")["id"]).content)
    response = outsider_api.post(f"{AGENTS}/import", document, format="json")
    assert response.status_code == 201
    assert Agent.objects.get(pk=response.json()["id"]).owner == outsider


def good_file(**agent) -> dict:
    return {"format": "localai-memory.agent", "version": 1,
            "agent": {"name": "Copied", "tools": ["memory"], "addons": [], "grants": ["memory.write"],
                      "memory": "own", "memory_save": None, "instructions": "", **agent}}


@pytest.mark.parametrize(
    ("document", "code"),
    [
        ([1, 2], "invalid_agent_file"),
        ({"name": "not an export"}, "invalid_agent_file"),
        ({**good_file(), "format": "something-else"}, "invalid_agent_file"),
        ({**good_file(), "version": 2}, "unsupported_agent_file"),
        ({**good_file(), "version": True}, "unsupported_agent_file"),
        ({**good_file(), "notes": []}, "invalid_agent_file"),
        ({"format": "localai-memory.agent", "version": 1}, "invalid_agent_file"),
        ({"format": "localai-memory.agent", "version": 1, "agent": "Cook"}, "invalid_agent_file"),
        (good_file(id=4), "invalid_agent_file"),
        (good_file(memory_save="auto"), "memory_save_not_allowed"),
        (good_file(memory_save="ask"), "memory_save_not_allowed"),
        (good_file(memory="everything"), "invalid_memory"),
        (good_file(name=""), "invalid_name"),
        (good_file(name=None), "invalid_name"),
        (good_file(tools="memory"), "invalid_tools"),
        (good_file(grants=[None]), "invalid_grants"),
    ],
)
def test_a_bad_agent_file_is_a_400_and_makes_no_agent(api, document, code):
    response = api.post(f"{AGENTS}/import", document, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert not Agent.objects.exists()


def test_a_file_without_a_name_is_a_400(api):
    document = good_file()
    del document["agent"]["name"]
    response = api.post(f"{AGENTS}/import", document, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_name"


@pytest.mark.parametrize("content", [b"\xff\xfenot json", b"[" * 2000 + b"]" * 2000])
def test_an_upload_that_is_not_json_is_a_400(api, content):
    upload = SimpleUploadedFile("agent.json", content, content_type="application/json")
    response = api.post(f"{AGENTS}/import", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_agent_file"
    assert not Agent.objects.exists()


def test_a_body_that_is_not_json_at_all_is_a_400(api):
    response = api.generic("POST", f"{AGENTS}/import", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


def test_a_file_missing_optional_lists_gets_the_defaults_of_a_new_agent(api):
    document = {"format": "localai-memory.agent", "version": 1, "agent": {"name": "Minimal"}}
    copy = api.post(f"{AGENTS}/import", document, format="json").json()
    assert (copy["tools"], copy["grants"], copy["memory"], copy["memory_save"]) == \
        (["memory"], ["memory.write"], None, None)
