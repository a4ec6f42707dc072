"""Each cap refuses with a 422 listing the current entries, and writes nothing."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from localai_memory.notes import services
from localai_memory.notes.models import ChangeSet, FileVersion, NoteFile
from localai_memory.notes.paths import INDEX_MAX_BYTES, INDEX_MAX_LINES, Scope
from localai_memory.notes.services import CapExceeded

from .conftest import assert_error

INDEX_PATHS = ["Memory/index.md", "Memory/agents/{agent}/index.md", "Memory/channels/{bot}-0a1b2c3d4e5f/index.md"]


@pytest.fixture
def path(request, owner) -> str:
    """The index of the parametrized scope, in a folder of the owner's own agent or bot."""
    from bridges.models import Binding
    from localai_memory.agents.services import agent_create

    if "{" not in request.param:
        return request.param
    agent = agent_create(owner_id=owner.pk, name="Chef")
    bot = Binding.objects.create(owner=owner, platform="telegram", name="Home bot", mode="polling")
    return request.param.format(agent=agent.pk, bot=bot.pk)


def snapshot(owner) -> tuple:
    return (sorted(NoteFile.objects.filter(owner=owner).values_list("path", "content", "version")),
            ChangeSet.objects.filter(owner=owner).count(), FileVersion.objects.filter(owner=owner).count())


def put_index(api, path: str, text: str, version: int | None):
    body: dict = {"content": text}
    if version is not None:
        body["version"] = version
    return api.put("/api/files/content?" + urlencode({"path": path}), body, format="json")


def lines(n: int, summary: str = "x") -> str:
    return "".join(f"- t{i}: {summary}\n" for i in range(n))


@pytest.mark.parametrize("path", INDEX_PATHS, indirect=True)
def test_an_index_of_40_lines_is_accepted_and_a_41st_line_is_refused_with_the_listing(api, owner, path):
    created = put_index(api, path, lines(INDEX_MAX_LINES), None)
    assert created.status_code == 200
    before = snapshot(owner)
    error = assert_error(put_index(api, path, lines(INDEX_MAX_LINES + 1), 1), 422, "cap_exceeded")
    details = error["details"]
    assert (details["path"], details["max_lines"], details["max_bytes"]) == (path, 40, 2048)
    assert [e["topic"] for e in details["entries"]] == [f"t{i}" for i in range(40)]
    assert details["entries"][0] == {"topic": "t0", "summary": "x", "file": None}
    assert snapshot(owner) == before


@pytest.mark.parametrize("path", INDEX_PATHS, indirect=True)
def test_an_index_over_two_kib_is_refused_with_the_listing(api, owner, path):
    put_index(api, path, "- home: lives in Rome -> home.md\n", None)
    before = snapshot(owner)
    big = "".join(f"- t{i}: {'y' * 100}\n" for i in range(20))  # 20 lines, well over 2 KiB
    assert len(big.encode()) > INDEX_MAX_BYTES
    error = assert_error(put_index(api, path, big, 1), 422, "cap_exceeded")
    assert error["details"]["entries"] == [{"topic": "home", "summary": "lives in Rome", "file": "home.md"}]
    assert snapshot(owner) == before


def exactly_two_kib() -> str:
    text = "".join(f"- t{i:02d}: {'z' * 56}\n" for i in range(32))  # 32 lines of 64 bytes
    assert len(text.encode()) == INDEX_MAX_BYTES
    return text


def test_an_index_of_exactly_two_kib_is_accepted_and_one_byte_more_is_refused(api, owner):
    assert put_index(api, "Memory/index.md", exactly_two_kib(), None).status_code == 200
    one_more = exactly_two_kib().replace("- t00: z", "- t00: zz", 1)
    assert_error(put_index(api, "Memory/index.md", one_more, 1), 422, "cap_exceeded")
    assert NoteFile.objects.get(owner=owner, path="Memory/index.md").content == exactly_two_kib()


def test_a_new_file_past_the_cap_is_refused_with_an_empty_listing_and_writes_nothing(api, owner):
    error = assert_error(put_index(api, "Memory/index.md", lines(41), None), 422, "cap_exceeded")
    assert error["details"]["entries"] == []
    assert snapshot(owner) == ([], 0, 0)


def test_a_saved_note_past_the_line_cap_is_refused_with_the_current_entries(owner):
    for i in range(INDEX_MAX_LINES):
        services.note_upsert(owner_id=owner.pk, scope=Scope.agent(5), topic=f"t{i}", summary="x", source="model")
    before = snapshot(owner)
    with pytest.raises(CapExceeded) as caught:
        services.note_upsert(owner_id=owner.pk, scope=Scope.agent(5), topic="one-more", summary="y",
                             details="a topic file that must not be written either", source="model")
    assert caught.value.status == 422
    assert len(caught.value.details["entries"]) == 40
    assert snapshot(owner) == before
    assert not NoteFile.objects.filter(owner=owner, path="Memory/agents/5/one-more.md").exists()


def test_replacing_a_line_at_the_cap_is_still_allowed(owner):
    for i in range(INDEX_MAX_LINES):
        services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=f"t{i}", summary="x", source="model")
    services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="t3", summary="changed", source="model")
    assert "- t3: changed\n" in NoteFile.objects.get(owner=owner, path="Memory/index.md").content


def test_restoring_an_old_version_cannot_pass_a_cap_because_every_version_was_within_it(api, owner):
    put_index(api, "Memory/index.md", lines(40), None)
    put_index(api, "Memory/index.md", lines(1), 1)
    response = api.post("/api/files/history/restore", {"path": "Memory/index.md", "version": 1}, format="json")
    assert response.status_code == 200
    assert NoteFile.objects.get(owner=owner, path="Memory/index.md").content == lines(40)
