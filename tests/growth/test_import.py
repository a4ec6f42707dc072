"""Import: the export zip back byte for byte, a merge that never overwrites silently, facts per the policy."""

from __future__ import annotations

import io
import json
import random
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client

from bridges.models import Binding
from localai_memory.agents.models import Agent
from localai_memory.core.invariants import check_invariants
from localai_memory.core.middleware import MULTIPART_ROOM
from localai_memory.growth import importing
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_confirm
from localai_memory.memory.providers import ADDON_EXPORT_FOLDER
from localai_memory.memory.services import settings_update
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes import services as notes_services
from localai_memory.notes.models import ChangeSet, NoteFile
from localai_memory.notes.paths import INDEX_MAX_LINES, Scope

from ..api.conftest import assert_error

pytestmark = pytest.mark.django_db
URL = "/api/chats/memory/import"


def files_of(owner) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(notes_services.memory_export(owner_id=owner.pk))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def a_zip(members: dict[str, bytes | str], *, symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            info = zipfile.ZipInfo(name)
            if name == symlink:
                info.external_attr = 0o120777 << 16
            archive.writestr(info, content)
    return buffer.getvalue()


def upload(client, data: bytes, name: str = "memory-export.zip"):
    return client.post(URL, {"file": _named(data, name)}, format="multipart")


def _named(data: bytes, name: str) -> io.BytesIO:
    stream = io.BytesIO(data)
    stream.name = name
    return stream


def agent_and_bot(user, *, agent: str = "Cook", bot: str = "Home bot") -> tuple[Agent, Binding]:
    """An agent and a Telegram bot of ``user``, by name (their ids differ from account to account)."""
    return (Agent.objects.create(owner=user, name=agent, tools=["memory"], grants=["memory.write"], memory="own"),
            Binding.objects.create(owner=user, platform="telegram", name=bot, mode="polling"))


def folders(user) -> tuple[Scope, Scope]:
    """The note folders of ``user``'s agent and bot (``agent_and_bot``)."""
    agent, bot = Agent.objects.get(owner=user), Binding.objects.get(owner=user)
    return Scope.agent(agent.pk), Scope.channel(bot.pk, "C123")


def notes_of(owner, *, moved: dict[Scope, Scope] | None = None) -> dict[str, bytes]:
    """The files of ``owner``'s export under ``Memory/``, their folders renamed as ``moved`` says."""
    renamed = {f"{old.root}/": f"{new.root}/" for old, new in (moved or {}).items()}
    found = {}
    for path, content in files_of(owner).items():
        if path.startswith("Memory/"):
            prefix = next((old for old in renamed if path.startswith(old)), None)
            found[renamed[prefix] + path[len(prefix):] if prefix else path] = content
    return found


@pytest.fixture
def alices_memory(owner):
    cook, bot = agent_and_bot(owner)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               details="Moved to Rome in 2024.\nLikes the Trastevere area — ☀️\n", source="files",
                               actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(cook.pk), topic="tone", summary="short answers",
                               source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.channel(bot.pk, "C123"), topic="team",
                               summary="Friday demos", details="no trailing newline", source="files", actor="you")
    return notes_services.memory_export(owner_id=owner.pk)


def test_the_export_imports_into_a_new_account_with_byte_identical_files(owner, make_user, alices_memory, client_for):
    newcomer = make_user("newcomer")
    agent_and_bot(newcomer)  # the agent and the bot of the same names, under ids of the newcomer's

    response = upload(client_for(newcomer), alices_memory)

    assert response.status_code == 200, response.content
    assert response.json()["mode"] == "restored" and response.json()["skipped"] == []
    (alices_agent, alices_bot), (agent, bot) = folders(owner), folders(newcomer)
    assert response.json()["moved"] == [
        {"from": f"{alices_agent.root}/", "to": f"{agent.root}/", "name": "Cook"},
        {"from": f"{alices_bot.root}/", "to": f"{bot.root}/", "name": "Home bot"}]
    assert notes_of(newcomer) == notes_of(owner, moved={alices_agent: agent, alices_bot: bot})
    assert ChangeSet.objects.get(owner=newcomer).source == "import"


def test_the_export_records_whose_agent_and_conversation_folders_are(owner, alices_memory):
    from localai_memory.agents.services import agent_delete

    cook, bot = folders(owner)
    recorded = json.loads(files_of(owner)[notes_services.FOLDERS_FILE])
    assert recorded == {"account": recorded["account"], "folders": [
        {"folder": cook.root, "agent": "Cook"},
        {"folder": bot.root, "bot": "Home bot", "platform": "telegram"}]}
    # a mark of Alice's account on this server (not her id), the same in each of her exports
    assert len(recorded["account"]) == 32
    assert recorded["account"] == json.loads(files_of(owner)[notes_services.FOLDERS_FILE])["account"]

    agent_delete(owner_id=owner.pk, agent_id=int(cook.key), memory="keep")

    assert json.loads(files_of(owner)[notes_services.FOLDERS_FILE])["folders"][0] == {
        "folder": cook.root, "agent": "Cook", "deleted": True}


def test_an_export_of_your_own_notes_alone_has_no_folders_file(owner):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")

    assert list(files_of(owner)) == ["Memory/index.md"]


def test_the_importances_you_gave_travel_with_the_export(owner, make_user, client_for):
    cook = Scope.agent(agent_and_bot(owner)[0].pk)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=cook, topic="tone", summary="short answers",
                               source="files", actor="you")
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.95)
    notes_services.note_importance_set(owner_id=owner.pk, scope=cook, topic="tone", importance=0.2)
    exported = notes_services.memory_export(owner_id=owner.pk)
    assert json.loads(files_of(owner)[notes_services.IMPORTANCE_FILE]) == {"importance": [
        {"scope": cook.name, "topic": "tone", "importance": 0.2},
        {"scope": "user", "topic": "home", "importance": 0.95}]}

    newcomer = make_user("newcomer")
    newcomers_cook = agent_and_bot(newcomer)[0].pk
    response = upload(client_for(newcomer), exported)
    assert response.status_code == 200 and response.json()["importances"] == 2, response.content
    assert notes_selectors.note_importances(owner_id=newcomer.pk) == {
        ("user", "", "home"): 0.95, ("agent", str(newcomers_cook), "tone"): 0.2}

    # Merged into an account that weighed "home" itself: its own weighing stays.
    other = make_user("other")
    others_cook = agent_and_bot(other)[0].pk
    notes_services.note_upsert(owner_id=other.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    notes_services.note_importance_set(owner_id=other.pk, scope=Scope.user(), topic="home", importance=0.5)
    result = importing.import_zip(owner_id=other.pk, data=exported)
    assert result.mode == "merged" and result.importances == 1
    assert notes_selectors.note_importances(owner_id=other.pk) == {
        ("user", "", "home"): 0.5, ("agent", str(others_cook), "tone"): 0.2}

    # The import's Undo takes back the importances it gave with its notes.
    notes_services.change_undo(owner_id=newcomer.pk, change_id=response.json()["change_id"])
    assert notes_selectors.note_importances(owner_id=newcomer.pk) == {}
    assert not NoteFile.objects.filter(owner=newcomer).exists()


def test_a_note_that_waits_as_a_suggestion_takes_the_importance_of_the_export_when_confirmed(owner, api):
    user = Scope.user()
    for topic, summary, weight in (("home", "lives in Rome", 0.95), ("diet", "vegetarian", 0.3)):
        notes_services.note_upsert(owner_id=owner.pk, scope=user, topic=topic, summary=summary, source="files",
                                   actor="you")
        notes_services.note_importance_set(owner_id=owner.pk, scope=user, topic=topic, importance=weight)
    exported = notes_services.memory_export(owner_id=owner.pk)
    # since the export: "home" says something else and weighs less, "diet" was weighed anew and deleted
    notes_services.note_upsert(owner_id=owner.pk, scope=user, topic="home", summary="lives in Lisbon",
                               source="files", actor="you")
    notes_services.note_importance_set(owner_id=owner.pk, scope=user, topic="home", importance=0.5)
    notes_services.note_importance_set(owner_id=owner.pk, scope=user, topic="diet", importance=0.6)
    notes_services.note_upsert(owner_id=owner.pk, scope=user, topic="diet", delete=True, source="files",
                               actor="you")

    body = upload(api, exported).json()

    assert body["importances"] == 0 and len(body["proposals"]) == 2, body
    listed = {p["topic"]: p for p in api.get("/api/chats/memory/proposals").json()["proposals"]}
    assert (listed["home"]["importance"], listed["diet"]["importance"]) == (0.95, 0.3)  # the inbox shows it
    browser = Client()
    browser.force_login(owner)
    assert "Saved, the note has the importance 0.95 that the export gave it." in browser.get("/inbox/").content.decode()
    assert notes_selectors.note_importances(owner_id=owner.pk)[("user", "", "home")] == 0.5  # nothing yet
    for topic in ("home", "diet"):
        confirmed = api.post(f"/api/chats/memory/proposals/{listed[topic]['id']}/confirm")
        assert confirmed.status_code == 200, confirmed.content
    assert notes_selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.95,
                                                                 ("user", "", "diet"): 0.3}
    assert notes_selectors.index_text(owner_id=owner.pk, scope=user) == "- home: lives in Rome\n- diet: vegetarian\n"
    # the confirm's Undo takes the importance back with the text
    home = Proposal.objects.get(pk=listed["home"]["id"])
    notes_services.change_undo(owner_id=owner.pk, change_id=home.change_set_id)
    assert notes_selectors.note_importances(owner_id=owner.pk)[("user", "", "home")] == 0.5


def test_your_own_export_goes_to_the_agent_and_the_bot_you_made_again_after_deleting_them(owner, api, alices_memory):
    from bridges.services import binding_delete
    from localai_memory.agents.services import agent_delete

    old_agent, old_bot = folders(owner)
    agent_delete(owner_id=owner.pk, agent_id=int(old_agent.key), memory="delete")
    binding_delete(binding=Binding.objects.get(owner=owner))  # its conversation's notes stay where they were
    agent_and_bot(owner)  # made again: the same names, new ids
    agent, bot = folders(owner)

    body = upload(api, alices_memory).json()

    assert body["mode"] == "merged" and body["skipped"] == [] and body["proposals"] == []
    assert body["moved"] == [{"from": f"{old_agent.root}/", "to": f"{agent.root}/", "name": "Cook"},
                             {"from": f"{old_bot.root}/", "to": f"{bot.root}/", "name": "Home bot"}]
    assert sorted(body["added"]) == [f"{agent.root}/tone", f"{bot.root}/team"]
    assert notes_selectors.index_text(owner_id=owner.pk, scope=agent) == "- tone: short answers\n"
    assert not NoteFile.objects.filter(owner=owner, path__startswith=f"{old_agent.root}/").exists()


def test_an_export_that_does_not_name_its_folders_keeps_yours_and_skips_the_others(owner, outsider, api):
    mine, theirs = agent_and_bot(owner)[0], agent_and_bot(outsider)[0]
    zipped = a_zip({f"Memory/agents/{mine.pk}/index.md": "- tone: short answers\n",
                    f"Memory/agents/{theirs.pk}/index.md": "- tone: long answers\n",
                    "Memory/agents/999999/index.md": "- tone: no answers\n",
                    "Memory/channels/999999-abcdef012345/index.md": "- team: Friday demos\n"})

    body = upload(api, zipped).json()

    assert body["written"] == [f"Memory/agents/{mine.pk}/index.md"]
    assert [skip["path"] for skip in body["skipped"]] == [
        f"Memory/agents/{theirs.pk}/", "Memory/agents/999999/", "Memory/channels/999999-abcdef012345/"]
    assert "the export does not say which agent it was" in body["skipped"][0]["reason"]
    assert "the export does not say which bot it was" in body["skipped"][2]["reason"]
    # another account's agent reads as nobody's: the answer tells nothing about it
    assert (body["skipped"][0]["reason"].replace(str(theirs.pk), "N")
            == body["skipped"][1]["reason"].replace("999999", "N"))
    assert not NoteFile.objects.filter(owner=owner, path__startswith=f"Memory/agents/{theirs.pk}/").exists()


def test_a_name_two_of_your_agents_share_is_skipped_rather_than_guessed(owner, make_user, alices_memory):
    other = make_user("other")
    _, bot = agent_and_bot(other)
    Agent.objects.create(owner=other, name="Cook")
    cook, alices_bot = folders(owner)

    result = importing.import_zip(owner_id=other.pk, data=alices_memory)

    assert result.skipped == [{"path": f"{cook.root}/", "reason": (
        "Not imported: 2 of your agents are named “Cook”, so the import cannot tell which one these notes are for. "
        "Rename all but one of them, then import the zip again.")}]
    assert result.moved == [{"from": f"{alices_bot.root}/", "to": f"{Scope.channel(bot.pk, 'C123').root}/",
                             "name": "Home bot"}]
    assert not NoteFile.objects.filter(owner=other, path__startswith="Memory/agents/").exists()


def test_two_folders_of_the_zip_for_one_agent_are_not_merged(owner, make_user):
    first = Agent.objects.create(owner=owner, name="Cook")
    second = Agent.objects.create(owner=owner, name="Cook")
    for agent, tone in ((first, "short answers"), (second, "long answers")):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.agent(agent.pk), topic="tone", summary=tone,
                                   source="files", actor="you")
    other = make_user("other")
    cook = Scope.agent(Agent.objects.create(owner=other, name="Cook").pk)

    result = importing.import_zip(owner_id=other.pk, data=notes_services.memory_export(owner_id=owner.pk))

    assert result.moved == [{"from": f"Memory/agents/{first.pk}/", "to": f"{cook.root}/", "name": "Cook"}]
    assert result.skipped == [{"path": f"Memory/agents/{second.pk}/", "reason": (
        f"Not imported: another folder of the zip, Memory/agents/{first.pk}/, goes to {cook.root}/ already, and two "
        "folders are not merged into one. Import this one on its own.")}]
    assert notes_selectors.index_text(owner_id=other.pk, scope=cook) == "- tone: short answers\n"


def test_the_kept_notes_of_a_deleted_agent_go_back_only_to_the_account_that_kept_them(owner, make_user,
                                                                                       alices_memory):
    from localai_memory.agents.services import agent_delete

    cook, _ = folders(owner)
    agent_delete(owner_id=owner.pk, agent_id=int(cook.key), memory="keep")
    exported = notes_services.memory_export(owner_id=owner.pk)
    other = make_user("other")
    agent_and_bot(other)  # a "Cook" of their own does not take the notes kept from Alice's deleted one

    result = importing.import_zip(owner_id=other.pk, data=exported)

    assert result.skipped == [{"path": f"{cook.root}/", "reason": (
        "Not imported: these are the notes kept from “Cook”, an agent deleted before the export, and no agent of "
        "yours reads them.")}]
    # Alice's own account takes them back to where she kept them (the Deleted agents tab)
    notes_services.memory_forget(owner_id=owner.pk, actor="you")
    mine = importing.import_zip(owner_id=owner.pk, data=exported)
    assert mine.mode == "restored" and mine.skipped == [] and f"{cook.root}/index.md" in mine.written


def members(data: bytes) -> dict[str, bytes]:
    """The note files of an export zip, by path."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name.startswith("Memory/")}


def with_folders_file(data: bytes, **changes: object) -> bytes:
    """The export ``data`` with its folders file changed (``account=None`` takes the account away, as an export
    made before exports recorded it, or on another server, has none of this one's)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files: dict[str, bytes | str] = {name: archive.read(name) for name in archive.namelist()}
    body = json.loads(files[notes_services.FOLDERS_FILE])
    body.update(changes)
    files[notes_services.FOLDERS_FILE] = json.dumps({k: v for k, v in body.items() if v is not None})
    return a_zip(files)


def rename(api, agent: Scope, name: str) -> None:
    response = api.put(f"/api/chats/agents/{agent.key}", {"name": name}, format="json")
    assert response.status_code == 200, response.content


def test_your_own_export_goes_to_your_agent_and_bot_by_their_ids_after_you_renamed_them(owner, api, alices_memory):
    cook, bot = folders(owner)
    rename(api, cook, "Chef")
    Binding.objects.filter(owner=owner).update(name="Kitchen bot")
    Agent.objects.create(owner=owner, name="Cook")  # a new agent of the old name: Chef's notes are not its
    notes_services.memory_forget(owner_id=owner.pk, actor="you")

    body = upload(api, alices_memory).json()

    assert body["mode"] == "restored" and body["skipped"] == [] and body["moved"] == []
    assert body["renamed"] == [{"folder": f"{cook.root}/", "name": "Cook", "now": "Chef"},
                               {"folder": f"{bot.root}/", "name": "Home bot", "now": "Kitchen bot"}]
    assert notes_of(owner) == members(alices_memory)  # every note back where it was
    assert check_invariants() == []


def test_your_own_export_keeps_two_agents_of_one_name_apart_after_you_renamed_one(owner, api):
    first, second = (Scope.agent(Agent.objects.create(owner=owner, name="Cook").pk) for _ in range(2))
    for scope, tone in ((first, "short answers"), (second, "long answers")):
        notes_services.note_upsert(owner_id=owner.pk, scope=scope, topic="tone", summary=tone, source="files",
                                   actor="you")
    exported = notes_services.memory_export(owner_id=owner.pk)
    rename(api, second, "Chef")
    notes_services.memory_forget(owner_id=owner.pk, actor="you")

    body = upload(api, exported).json()

    assert body["skipped"] == [] and body["moved"] == []
    assert body["renamed"] == [{"folder": f"{second.root}/", "name": "Cook", "now": "Chef"}]
    assert notes_selectors.index_text(owner_id=owner.pk, scope=first) == "- tone: short answers\n"
    assert notes_selectors.index_text(owner_id=owner.pk, scope=second) == "- tone: long answers\n"


@pytest.mark.parametrize("name_when_deleted", ["Cook", "Chef"])
def test_your_own_export_brings_the_notes_of_an_agent_deleted_since_back_to_its_kept_notes_and_says_so(
        owner, api, alices_memory, name_when_deleted):
    from localai_memory.agents.services import agent_delete

    cook, _ = folders(owner)
    rename(api, cook, name_when_deleted)
    agent_delete(owner_id=owner.pk, agent_id=int(cook.key), memory="delete")

    body = upload(api, alices_memory).json()

    assert body["mode"] == "merged" and body["skipped"] == [] and body["moved"] == []
    assert body["deleted_agents"] == [{"folder": f"{cook.root}/", "name": name_when_deleted}]
    # the agent's notes went to the Trash with it: one comes back to its kept notes once the owner says so
    assert body["added"] == []
    [back] = Proposal.objects.filter(owner=owner)
    assert (back.scope_key, back.topic, back.reason) == (cook.key, "tone", "import_deleted")
    assert body["proposals"] == [back.pk]
    proposal_confirm(owner_id=owner.pk, proposal_id=back.pk, actor="you")
    assert notes_selectors.index_text(owner_id=owner.pk, scope=cook) == "- tone: short answers\n"


def test_a_conversation_of_a_bot_you_removed_that_comes_back_is_said_and_one_whose_notes_you_deleted_is_skipped_with_why(
        owner, api, alices_memory):
    from bridges.services import binding_delete

    _, bot = folders(owner)
    binding_delete(binding=Binding.objects.get(owner=owner))  # its conversation's notes stay where they were
    # an export of that conversation alone, made since: it names no bot, nor the account
    removed_since = notes_services.memory_export(owner_id=owner.pk, folder=bot.root)
    assert notes_services.FOLDERS_FILE not in zipfile.ZipFile(io.BytesIO(removed_since)).namelist()
    notes_services.note_upsert(owner_id=owner.pk, scope=bot, topic="team", summary="Monday demos", source="files",
                               actor="you")

    body = upload(api, alices_memory).json()

    assert body["skipped"] == [] and body["moved"] == [] and body["deleted_agents"] == []
    assert body["removed_bots"] == [{"folder": f"{bot.root}/", "name": "Home bot", "platform": "telegram"}]
    assert (f"{bot.root}/ back to the notes left from the Telegram bot “Home bot”, which you removed (Files; no chat "
            "reads them)") in body["message"].splitlines()
    assert len(body["proposals"]) == 1  # "Friday demos" differs from the kept "Monday demos": it waits

    # its notes deleted since: not brought back, and the answer says why and what to do, in the terminal too
    notes_services.note_upsert(owner_id=owner.pk, scope=bot, topic="team", delete=True, source="files", actor="you")
    for zipped, bot_named in ((alices_memory, "the Telegram bot “Home bot”"),
                              (removed_since, f"the bot of this conversation ({bot.key.split('-')[0]})")):
        body = upload(api, zipped).json()
        assert body["removed_bots"] == [] and body["skipped"] == [{"path": f"{bot.root}/", "reason": (
            f"Not imported: you removed {bot_named} from your account, and its notes were deleted since, so no chat "
            "of yours would read them. To have them back, restore them from Files → Trash"
            + (", or connect the bot again and import the zip again." if "Home bot" in bot_named else "."))}]
        assert f"Skipped {bot.root}/: {body['skipped'][0]['reason']}" in body["message"].splitlines()
    assert not NoteFile.objects.filter(owner=owner, path__startswith=f"{bot.root}/").exists()
    printed = io.StringIO()
    call_command("memory", "import", "--user", "alice", "-", stdin=io.BytesIO(alices_memory), stdout=printed)
    assert "you removed the Telegram bot “Home bot” from your account" in printed.getvalue()


@pytest.mark.parametrize("account", [None, "another"])
def test_an_export_not_shown_to_be_of_this_account_does_not_take_a_renamed_agent_by_its_id(
        owner, outsider, api, alices_memory, account):
    cook, _ = folders(owner)
    rename(api, cook, "Chef")
    if account == "another":  # the mark of an export made in Mallory's account, on a folder with the id of Alice's agent
        notes_services.note_upsert(owner_id=outsider.pk, scope=Scope.agent(agent_and_bot(outsider)[0].pk),
                                   topic="tone", summary="long answers", source="files", actor="you")
        account = json.loads(files_of(outsider)[notes_services.FOLDERS_FILE])["account"]
    zipped = with_folders_file(alices_memory, account=account)

    body = upload(api, zipped).json()

    assert body["renamed"] == [] and body["skipped"] == [{"path": f"{cook.root}/", "reason": (
        "Not imported: none of your agents is named “Cook”, whose notes these are. Make or import an agent of that "
        "name, then import the zip again. Your agent “Chef” has this folder's id; if it is the one these notes "
        "were made with, renamed since, name it “Cook” for the import: this export does not show that it was made "
        "in this account, so the id alone does not tell.")}]
    assert notes_selectors.index_text(owner_id=owner.pk, scope=cook) == "- tone: short answers\n"  # untouched


@pytest.mark.parametrize(("body", "message"), [
    ("not json", "not the JSON Export writes"),
    ('{"folders": {}}', "must hold"),
    ('{"folders": [{"folder": "Memory", "agent": "Cook"}]}', "entry 1"),
    ('{"folders": [{"folder": "Memory/agents/7/", "agent": "Cook"}]}', "entry 1"),
    ('{"folders": [{"folder": "Memory/agents/7", "agent": ""}]}', "entry 1"),
    ('{"folders": [{"folder": "Memory/agents/7", "agent": "Cook", "deleted": "yes"}]}', "entry 1"),
    ('{"folders": [{"folder": "Memory/channels/3-abcdef012345", "bot": "Home"}]}', "entry 1"),
    ('{"account": 7, "folders": []}', "account must be the mark Export writes"),
])
def test_a_bad_folders_file_is_refused_and_nothing_is_written(owner, api, body, message):
    response = upload(api, a_zip({"Memory/index.md": "- home: lives in Rome\n", "folders.json": body}))

    error = assert_error(response, 400, "invalid_import")
    assert message in error["message"]
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_an_importance_left_from_a_forgotten_note_neither_travels_nor_blocks_the_exports(owner):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source="files", actor="you")
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.95)
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="diet", importance=0.1)
    exported = notes_services.memory_export(owner_id=owner.pk)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", delete=True, source="files",
                               actor="you")
    assert [e["topic"] for e in json.loads(files_of(owner)[notes_services.IMPORTANCE_FILE])["importance"]] == ["home"]

    notes_services.memory_forget(owner_id=owner.pk, actor="you")  # to the Trash; the importances stay behind
    result = importing.import_zip(owner_id=owner.pk, data=exported)
    assert result.mode == "restored" and result.importances == 2
    assert notes_selectors.note_importances(owner_id=owner.pk) == {("user", "", "home"): 0.95,
                                                                  ("user", "", "diet"): 0.1}


def test_an_imported_note_does_not_take_the_importance_left_from_a_forgotten_note_of_its_topic(owner):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Oslo",
                               source="files", actor="you")
    notes_services.note_importance_set(owner_id=owner.pk, scope=Scope.user(), topic="home", importance=0.9)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", delete=True, source="files",
                               actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="green tea",
                               source="files", actor="you")
    zipped = a_zip({"Memory/index.md": "- home: lives in Rome\n- tea: green tea\n"})

    result = importing.import_zip(owner_id=owner.pk, data=zipped)

    assert result.mode == "merged" and result.added == []  # "home" was deleted (in the Trash): it asks first
    [home] = Proposal.objects.filter(owner=owner, pk__in=result.proposals)
    proposal_confirm(owner_id=owner.pk, proposal_id=home.pk, actor="you")
    assert "- home: lives in Rome" in notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())
    assert notes_selectors.note_importances(owner_id=owner.pk) == {}


def test_an_export_without_importances_has_no_importance_file(owner, alices_memory):
    assert notes_services.IMPORTANCE_FILE not in files_of(owner)


@pytest.mark.parametrize(("body", "message"), [
    ("not json", "not the JSON Export writes"),
    ('{"importance": {}}', "must hold"),
    ('{"importance": [{"scope": "user", "topic": "home", "importance": 7}]}', "entry 1"),
    ('{"importance": [{"scope": "galaxy", "topic": "home", "importance": 0.5}]}', "entry 1"),
    ('{"importance": [{"scope": "user", "topic": "Home!", "importance": 0.5}]}', "entry 1"),
])
def test_a_bad_importance_file_is_refused_and_nothing_is_written(owner, api, body, message):
    response = upload(api, a_zip({"Memory/index.md": "- home: lives in Rome\n", "importance.json": body}))

    error = assert_error(response, 400, "invalid_import")
    assert message in error["message"]
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_importing_into_a_full_index_is_refused_with_the_listing_and_nothing_is_half_imported(
        owner, make_user, alices_memory, client_for):
    full = make_user("full")
    for number in range(INDEX_MAX_LINES - 1):
        notes_services.note_upsert(owner_id=full.pk, scope=Scope.user(), topic=f"t{number}", summary=f"note {number}",
                                   source="files", actor="you")
    notes_services.note_upsert(owner_id=full.pk, scope=Scope.user(), topic="home", summary="lives in Oslo",
                               source="files", actor="you")
    before = files_of(full)
    changes = ChangeSet.objects.filter(owner=full).count()

    response = upload(client_for(full), alices_memory)

    error = assert_error(response, 422, "cap_exceeded")
    assert {e["topic"] for e in error["details"]["entries"]} >= {"t0", "t38", "home"}
    assert files_of(full) == before  # not the agent's or the conversation's notes either
    assert ChangeSet.objects.filter(owner=full).count() == changes
    assert not Proposal.objects.filter(owner=full).exists()


def test_a_merge_adds_new_topics_and_shows_differences_as_proposals(owner, make_user, alices_memory):
    other = make_user("other")
    agent_and_bot(other)
    notes_services.note_upsert(owner_id=other.pk, scope=Scope.user(), topic="home", summary="lives in Oslo",
                               source="files", actor="you")
    notes_services.note_upsert(owner_id=other.pk, scope=Scope.user(), topic="diet", summary="vegetarian",
                               source="files", actor="you")

    result = importing.import_zip(owner_id=other.pk, data=alices_memory)

    assert result.mode == "merged"
    agent, bot = folders(other)
    assert sorted(result.added) == [f"{agent.root}/tone", f"{bot.root}/team"]
    assert result.unchanged == ["Memory/diet"]
    [difference] = Proposal.objects.filter(owner=other)
    assert (difference.topic, difference.old_summary, difference.summary) == ("home", "lives in Oslo", "lives in Rome")
    assert difference.source == "import" and difference.correction
    assert "- home: lives in Oslo" in notes_selectors.index_text(owner_id=other.pk, scope=Scope.user())


def test_a_merge_refused_for_a_line_too_long_to_propose_names_its_note_and_file(owner, make_user, api):
    other = make_user("other")
    long = "lives in Oslo, " + "near the fjord, " * 15  # over 200 characters: possible through the Files API
    notes_services.file_write(owner_id=other.pk, path="Memory/index.md", content=f"- home: {long} -> home.md\n",
                              version=None)
    notes_services.file_write(owner_id=other.pk, path="Memory/home.md", content="Oslo.\n", version=None)
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    before = files_of(owner)

    response = upload(api, notes_services.memory_export(owner_id=other.pk))

    error = assert_error(response, 400, "summary_too_long")
    assert "Memory/index.md, the note 'home'" in error["message"]
    assert error["details"] == {"path": "Memory/index.md", "topic": "home", "file": "Memory/home.md"}
    assert files_of(owner) == before and not Proposal.objects.filter(owner=owner).exists()


def test_importing_the_same_zip_twice_changes_nothing_the_second_time(owner, alices_memory):
    result = importing.import_zip(owner_id=owner.pk, data=alices_memory)

    assert result.written == [] and result.proposals == [] and len(result.unchanged) == 4


def test_a_zip_imported_again_lists_the_suggestions_still_waiting_under_waiting(owner, api):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    export = a_zip({"Memory/index.md": "- home: lives in Lisbon\n"})

    first = upload(api, export).json()
    again = upload(api, export).json()

    [differs] = Proposal.objects.filter(owner=owner)
    assert (first["proposals"], first["waiting"]) == ([differs.pk], [])
    assert (again["proposals"], again["waiting"]) == ([], [differs.pk])  # not asked twice, and said so


def test_a_line_that_names_another_topics_file_is_refused_naming_it_and_nothing_is_written(owner, api):
    export = a_zip({"Memory/index.md": "- home: lives in Rome\n- alpha: summary of alpha -> beta.md\n",
                    "Memory/beta.md": "details of beta\n"})

    for account in ("empty", "with notes"):
        if account == "with notes":
            notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="green tea",
                                       source="files", actor="you")
        before = files_of(owner)
        error = assert_error(upload(api, export), 400, "invalid_import")
        assert error["message"].startswith("Memory/index.md: line 2: the note 'alpha' names beta.md")
        assert "alpha.md" in error["message"]
        assert error["details"] == {"path": "Memory/index.md", "line": 2, "topic": "alpha", "file": "beta.md"}
        assert files_of(owner) == before and not Proposal.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("members, symlink, message", [
    ({"../etc/passwd": "x"}, None, "'..'"),
    ({"Memory/../../x.md": "x"}, None, "'..'"),
    ({"/Memory/index.md": "- a: b\n"}, None, "plain note path"),
    ({"Notes/index.md": "- a: b\n"}, None, "Memory/"),
    ({"Memory/evil.sh": "x"}, None, ".md"),
    ({"Memory/link.md": "/etc/passwd"}, "Memory/link.md", "link"),
    ({"Memory/big.md": "x" * 9000}, None, "larger than"),
    ({"Memory/index.md": "not an index line\n"}, None, "not an index entry"),
    ({"Memory/bin.md": b"\xff\xfe"}, None, "UTF-8"),
])
def test_an_unsafe_zip_is_refused_and_nothing_is_written(owner, api, members, symlink, message):
    response = upload(api, a_zip(members, symlink=symlink))

    error = assert_error(response, 400, "invalid_import")
    assert message in error["message"]
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_something_that_is_not_a_zip_is_refused(owner, api):
    response = upload(api, b"PK\x03\x04 not really a zip")

    assert_error(response, 400, "invalid_import")


def test_a_zip_bigger_than_the_limit_is_refused(owner):
    with pytest.raises(importing.TooLarge):
        importing.read_export_zip(b"PK\x03\x04" + b"\0" * (importing.ZIP_MAX_BYTES + 1))


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
def test_a_file_past_the_servers_body_limit_is_a_json_413_naming_the_limit_and_nothing_is_written(
        owner, api, settings, accept):
    big = b"PK\x03\x04" + b"\0" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + MULTIPART_ROOM)

    error = assert_error(api.post(URL, {"file": _named(big, "big.zip")}, format="multipart", HTTP_ACCEPT=accept,
                                  HTTP_ORIGIN="http://testserver"), 413, "too_large")

    assert error["message"] == (f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; "
                                "nothing was saved.")
    assert not NoteFile.objects.filter(owner=owner).exists() and not Proposal.objects.filter(owner=owner).exists()


def a_zip_of_exactly(size: int, members: dict[str, str]) -> bytes:
    """An export zip of ``size`` bytes: ``members`` and, filling it up, what a memory add-on exported beside
    the notes (random bytes, stored: they do not shrink)."""
    filler = f"{ADDON_EXPORT_FOLDER}/sample/notes.bin"
    data = a_zip({**members, filler: b""})
    data = a_zip({**members, filler: random.Random(7).randbytes(size - len(data))})
    assert len(data) == size
    return data


@pytest.mark.parametrize(("server_limit", "said"), [(None, "1 MB (1048576 bytes)"),
                                                     (256 * 1024, "256 KB (262144 bytes)")])
def test_a_zip_as_large_as_an_import_takes_is_imported_whole_and_a_byte_more_is_refused_naming_the_limit(
        owner, api, settings, server_limit, said):
    if server_limit is not None:  # a server that takes smaller bodies: its limit is the file's
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = server_limit
    largest = min(settings.DATA_UPLOAD_MAX_MEMORY_SIZE, importing.ZIP_MAX_BYTES)
    notes = {"Memory/index.md": "- home: lives in Rome\n"}

    error = assert_error(upload(api, a_zip_of_exactly(largest + 1, notes)), 413, "import_too_large")
    assert error["message"] == f"The file is too big to import: it may be at most {said}. Nothing was imported."
    assert not NoteFile.objects.filter(owner=owner).exists()

    response = upload(api, a_zip_of_exactly(largest, notes))
    assert response.status_code == 200, response.content
    assert notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- home: lives in Rome\n"


def test_a_list_of_facts_waits_for_confirmation_by_default(owner, api):
    response = api.post(URL, {"facts": "- Lives in Porto\n* Prefers metric units\n\n1. Drinks no coffee\n"},
                        format="json")

    assert response.status_code == 200, response.content
    assert response.json()["proposals"] and response.json()["written"] == []
    assert sorted(Proposal.objects.filter(owner=owner).values_list("summary", flat=True)) == [
        "Drinks no coffee", "Lives in Porto", "Prefers metric units"]
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_a_list_of_facts_is_saved_at_once_under_save_and_tell_within_the_policys_limits(owner, api):
    settings_update(user_id=owner.pk, save_mode="auto")
    facts = [f"Fact number {n} about {word}" for n, word in enumerate(["tea", "jazz", "cats", "rain", "maps",
                                                                         "chess", "kites"])]
    facts.append("my password is hunter22")

    body = api.post(URL, {"facts": facts}, format="json").json()

    assert len(body["added"]) == 5  # a reply saves at most 5 notes at once
    waiting = Proposal.objects.filter(owner=owner)
    assert waiting.count() == 3
    assert waiting.get(summary__contains="password").reason == "looks_secret"


def test_facts_never_take_the_topic_of_a_waiting_proposal_or_of_a_stray_topic_file(owner, api):
    api.post(URL, {"facts": "Likes green tea"}, format="json")
    (waiting,) = Proposal.objects.filter(owner=owner)
    notes_services.file_write(owner_id=owner.pk, path="Memory/drinks-tea.md", content="Green.\n", version=None)

    api.post(URL, {"facts": "Likes green tea with lemon\nDrinks tea"}, format="json")  # the same first words

    topics = list(Proposal.objects.filter(owner=owner).order_by("pk").values_list("topic", flat=True))
    assert len(topics) == 3 and len(set(topics)) == 3 and topics[0] == waiting.topic
    assert "drinks-tea" not in topics
    for proposal in Proposal.objects.filter(owner=owner):  # confirming all keeps every fact
        proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="you")
    summaries = [e.summary for e in notes_selectors.index_entries(owner_id=owner.pk, scope=Scope.user())]
    assert sorted(summaries) == ["Drinks tea", "Likes green tea", "Likes green tea with lemon"]


def test_facts_in_another_script_take_the_free_topic_names_a_chat_suggestion_takes(owner, api):
    api.post(URL, {"facts": "Живёт в Порту\nПьёт чай"}, format="json")

    assert sorted(Proposal.objects.filter(owner=owner).values_list("topic", flat=True)) == ["note", "note-2"]


@pytest.mark.parametrize("sent_as", ["file", "field", "json"])
def test_a_byte_order_mark_before_the_facts_is_no_part_of_them(owner, api, sent_as):
    text = "\ufeffLives in Porto\nDrinks tea\n"
    if sent_as == "file":
        response = upload(api, text.encode(), "facts.txt")
    else:
        response = api.post(URL, {"facts": text}, format="multipart" if sent_as == "field" else "json")

    assert response.status_code == 200, response.content
    assert sorted(Proposal.objects.filter(owner=owner).values_list("topic", "summary", "details")) == [
        ("drinks-tea", "Drinks tea", ""), ("lives-porto", "Lives in Porto", "")]  # no topic file: no BOM in one


@pytest.mark.parametrize("sent_as", ["file", "field"])
def test_facts_that_are_not_utf8_are_refused_as_a_file_or_as_a_form_field(owner, api, sent_as):
    body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"" + sent_as.replace("field", "facts").encode()
            + (b"\"; filename=\"facts.txt\"\r\nContent-Type: text/plain" if sent_as == "file" else b"\"")
            + b"\r\n\r\nLives in Porto \xff\xfe caf\xe9\r\n--XyZ--\r\n")

    response = api.generic("POST", URL, body, content_type="multipart/form-data; boundary=XyZ")

    assert_error(response, 400, "invalid_import")
    assert not Proposal.objects.filter(owner=owner).exists() and not NoteFile.objects.filter(owner=owner).exists()


def test_facts_that_repeat_a_note_are_left_alone(owner, api):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="Lives in Porto",
                               source="files", actor="you")

    body = api.post(URL, {"facts": "Lives in Porto\nlives in porto.\n"}, format="json").json()

    assert body["unchanged"] and body["proposals"] == []


def test_facts_that_correct_a_note_are_not_taken_for_it(owner, api):
    """A negation (in German too) or another emoji changes the fact, however alike the lines look."""
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="kaffee",
                               summary="Ich trinke morgens Kaffee mit Milch", source="files", actor="you")
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="animal",
                               summary="My favourite animal: 🐶", source="files", actor="you")

    body = api.post(URL, {"facts": "- Ich trinke morgens keinen Kaffee mit Milch\r\n- My favourite animal: 🐱"},
                    format="json").json()

    assert body["unchanged"] == []
    assert sorted(Proposal.objects.filter(owner=owner).values_list("summary", flat=True)) == [
        "Ich trinke morgens keinen Kaffee mit Milch", "My favourite animal: 🐱"]


def test_facts_are_refused_while_memory_is_off(owner, api):
    settings_update(user_id=owner.pk, enabled=False)

    assert_error(api.post(URL, {"facts": "Lives in Porto"}, format="json"), 403, "user_off")


def test_a_zip_is_refused_while_memory_is_off_as_facts_are_and_nothing_is_written(owner, api, tmp_path):
    from django.core.management import CommandError

    from .test_memory_command import memory

    export = a_zip({"Memory/index.md": "- home: lives in Rome -> home.md\n", "Memory/home.md": "Trastevere.\n"})
    settings_update(user_id=owner.pk, enabled=False)

    assert_error(upload(api, export), 403, "user_off")
    (tmp_path / "export.zip").write_bytes(export)
    with pytest.raises(CommandError, match="Memory is off"):
        memory("import", str(tmp_path / "export.zip"), user="alice")  # the terminal refuses it too
    assert not NoteFile.objects.filter(owner=owner).exists() and not Proposal.objects.filter(owner=owner).exists()


def test_a_zip_is_written_back_under_never_which_stops_the_assistant_not_the_person(owner, api):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    settings_update(user_id=owner.pk, save_mode="never")
    export = a_zip({"Memory/index.md": "- home: lives in Lisbon\n- tea: drinks green tea\n"})

    response = upload(api, export)

    assert response.status_code == 200, response.content
    assert response.json()["added"] == ["Memory/tea"]
    [differs] = Proposal.objects.filter(owner=owner)  # what differs waits for the person's answer
    assert (differs.topic, differs.summary, differs.source) == ("home", "lives in Lisbon", "import")
    assert_error(api.post(URL, {"facts": "Lives in Porto"}, format="json"), 403, "save_mode_never")


def test_facts_past_the_cap_are_refused_as_a_whole(owner, api):
    for number in range(INDEX_MAX_LINES - 1):
        notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic=f"t{number}",
                                   summary=f"note {number}", source="files", actor="you")

    response = api.post(URL, {"facts": "Lives in Porto\nDrinks tea\n"}, format="json")

    assert_error(response, 422, "cap_exceeded")
    assert not Proposal.objects.filter(owner=owner).exists()


def test_a_body_that_is_neither_a_zip_nor_facts_is_a_clear_400(api):
    assert_error(api.post(URL, {"nothing": 1}, format="json"), 400)
    assert_error(api.post(URL, {"facts": 3}, format="json"), 400, "invalid_import")
    assert_error(api.post(URL, {"facts": "   \n"}, format="json"), 400, "invalid_facts")


def test_an_outsiders_import_lands_only_in_their_own_account(owner, outsider, outsider_api, alices_memory):
    body = upload(outsider_api, alices_memory).json()

    assert notes_of(outsider) == {path: content for path, content in notes_of(owner).items()
                                  if path.count("/") == 1}  # their own copy of Alice's own notes…
    assert ChangeSet.objects.filter(owner=owner, source="import").count() == 0  # …Alice's account untouched
    # …and nothing in the folders of Alice's agent and bot, whose ids are hers: said why, not written
    cook, bot = folders(owner)
    assert body["skipped"] == [
        {"path": f"{cook.root}/", "reason": "Not imported: none of your agents is named “Cook”, whose notes these "
                                            "are. Make or import an agent of that name, then import the zip again."},
        {"path": f"{bot.root}/", "reason": "Not imported: none of your bots is the Telegram bot “Home bot”, whose "
                                           "conversation these notes are of. Connect it, then import the zip "
                                           "again."}]
    assert body["moved"] == [] and check_invariants() == []


def test_import_needs_a_login(anon_api):
    assert anon_api.post(URL, {"facts": "x"}, format="json").status_code == 401


def test_the_export_of_an_empty_account_imports_as_nothing_to_do_and_facts_with_nul_say_so(owner, api):
    empty = api.get("/api/chats/memory/export")
    assert empty.status_code == 200
    response = upload(api, b"".join(empty.streaming_content) if empty.streaming else empty.content)
    assert response.status_code == 400  # read as a zip (not as a list of facts), and said so
    assert response.json()["error"]["message"].startswith("The zip holds no notes")
    bad = api.post(URL, {"facts": "likes tea\x00and coffee"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_facts"
    assert "facts may not contain NUL" in bad.json()["error"]["message"]


def test_the_same_facts_imported_again_are_not_asked_twice(owner, api):
    first = api.post(URL, {"facts": "I play the violin\nI live in Porto\n"}, format="json").json()
    assert len(first["proposals"]) == 2

    again = api.post(URL, {"facts": "I play the violin\nI live in Porto\nI keep bees\n"}, format="json").json()

    assert sorted(again["waiting"]) == sorted(first["proposals"]) and len(again["proposals"]) == 1
    assert sorted(Proposal.objects.filter(owner=owner).values_list("summary", flat=True)) == [
        "I keep bees", "I live in Porto", "I play the violin"]
    for proposal in Proposal.objects.filter(owner=owner):  # confirming all makes one note per fact
        proposal_confirm(owner_id=owner.pk, proposal_id=proposal.pk, actor="you")
    summaries = [e.summary for e in notes_selectors.index_entries(owner_id=owner.pk, scope=Scope.user())]
    assert sorted(summaries) == ["I keep bees", "I live in Porto", "I play the violin"]


# --------------------------------------------------------------------------------------------------------
# A note deleted since the export, suggestions that expire, files that are not what an import takes
# --------------------------------------------------------------------------------------------------------


def test_a_note_deleted_since_the_export_waits_for_your_answer_instead_of_coming_back(owner, api, alices_memory):
    from .test_memory_command import memory

    memory("forget", "diet", "--yes", user="alice")  # to the Trash, after the export

    body = upload(api, alices_memory).json()

    assert "Memory/diet" not in body["added"] and body["added"] == []
    assert "- diet:" not in notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())
    [back] = Proposal.objects.filter(owner=owner)
    assert (back.topic, back.summary, back.old_summary, back.reason) == ("diet", "vegetarian", "", "import_deleted")
    assert body["proposals"] == [back.pk]
    assert [(item["id"], item["topic"], item["reason"]) for item in body["inbox"]] == [
        (back.pk, "diet", "import_deleted")]
    assert f"“diet” (#{back.pk}, you deleted it; it is in your Trash)" in body["message"]
    # Save brings it back as the export has it; imported again meanwhile, it is not asked twice
    again = upload(api, alices_memory).json()
    assert (again["proposals"], again["waiting"]) == ([], [back.pk])
    proposal_confirm(owner_id=owner.pk, proposal_id=back.pk, actor="you")
    assert "- diet: vegetarian" in notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user())


def test_a_topic_the_account_never_had_is_still_added_and_a_stray_file_deleted_since_is_skipped(owner, api):
    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    notes_services.file_write(owner_id=owner.pk, path="Memory/scratch.md", content="scratch\n", version=None)
    notes_services.file_delete(owner_id=owner.pk, path="Memory/scratch.md")

    body = upload(api, a_zip({"Memory/index.md": "- home: lives in Rome\n- tea: green tea\n",
                              "Memory/scratch.md": "scratch\n"})).json()

    assert body["added"] == ["Memory/tea"] and body["proposals"] == []
    assert body["skipped"] == [{"path": "Memory/scratch.md", "reason": importing.TRASHED_FILE}]
    assert not NoteFile.objects.filter(owner=owner, path="Memory/scratch.md").exists()


def test_the_answer_says_each_suggestion_waits_in_the_inbox_and_until_when(owner, api):
    from localai_memory.memory import policy

    notes_services.note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               source="files", actor="you")
    with time_machine.travel(datetime(2025, 6, 2, 14, 5, 30, tzinfo=UTC), tick=False):
        body = api.post(URL, {"facts": "Drinks green tea\nPlays the violin"}, format="json").json()
        zipped = upload(api, a_zip({"Memory/index.md": "- home: lives in Lisbon\n"})).json()

    proposals = list(Proposal.objects.filter(owner=owner).order_by("pk"))
    assert [item["id"] for item in body["inbox"]] == body["proposals"] == [p.pk for p in proposals[:2]]
    for item, proposal in zip(body["inbox"], proposals, strict=False):
        assert item["expires_at"] == proposal.expires_at.isoformat() == "2025-06-03T14:05:30+00:00"
        assert item["url"] == f"/inbox/#proposal-{proposal.pk}"
        assert proposal.expires_at - proposal.created_at == policy.PROPOSAL_TTL  # the 24 hours stay the rule
    assert body["message"].splitlines()[1] == (
        f"Waiting in your inbox for your answer: “drinks-green-tea” (#{proposals[0].pk}), “plays-violin” "
        f"(#{proposals[1].pk}) until 3 Jun 2025, 14:05 UTC. A suggestion not answered by then expires, and "
        "nothing of it is saved.")
    assert zipped["inbox"][0]["expires_at"] == "2025-06-03T14:05:30+00:00"
    assert f"“home” (#{proposals[2].pk}) until 3 Jun 2025, 14:05 UTC" in zipped["message"]


def test_a_suggestion_that_waited_already_is_listed_with_its_own_time(owner, api):
    start = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False):
        first = api.post(URL, {"facts": "Drinks green tea"}, format="json").json()
    with time_machine.travel(start + timedelta(hours=5), tick=False):
        again = api.post(URL, {"facts": "Drinks green tea\nPlays the violin"}, format="json").json()

    [new] = again["proposals"]
    assert again["waiting"] == first["proposals"]
    assert [item["id"] for item in again["inbox"]] == [new, *first["proposals"]]
    assert again["message"].splitlines()[1].startswith(
        f"Waiting in your inbox for your answer: “plays-violin” (#{new}) until 3 Jun 2025, 14:00 UTC; "
        f"“drinks-green-tea” (#{first['proposals'][0]}) until 3 Jun 2025, 09:00 UTC.")


@pytest.mark.parametrize(("data", "name", "words"), [
    (b"hello\n", "notzip.zip", "“notzip.zip” is named .zip but is not a zip file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "photo.png", "neither a zip nor UTF-8 text"),
])
def test_a_file_named_zip_that_is_none_or_no_text_at_all_is_refused_and_nothing_is_written(owner, api, data, name,
                                                                                          words):
    error = assert_error(upload(api, data, name), 400, "invalid_import")

    assert words in error["message"]
    assert "a list of facts as plain text, one fact a line" in error["message"]
    assert not Proposal.objects.filter(owner=owner).exists() and not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("document", [
    '{"memories": [{"text": "likes tea", "created": "2024-01-01"}]}',
    '[\n  {"text": "likes tea"},\n  {"text": "plays the violin"}\n]\n',
    '{"text": "likes tea"}\n{"text": "plays the violin"}\n',  # JSON Lines
])
@pytest.mark.parametrize("sent_as", ["file", "json"])
def test_another_tools_json_is_refused_saying_a_list_of_facts_is_plain_text(owner, api, document, sent_as):
    if sent_as == "file":
        response = upload(api, document.encode(), "memories.json")
    else:
        response = api.post(URL, {"facts": document}, format="json")

    error = assert_error(response, 400, "invalid_facts")
    assert error["message"] == importing.NOT_FACTS_BUT_JSON
    assert not Proposal.objects.filter(owner=owner).exists() and not NoteFile.objects.filter(owner=owner).exists()


def test_facts_that_merely_look_like_json_are_still_facts(owner, api):
    body = api.post(URL, {"facts": "[x] Lives in Porto\n{work} is at the harbour\n42"}, format="json").json()

    assert sorted(Proposal.objects.filter(owner=owner).values_list("summary", flat=True)) == [
        "42", "Lives in Porto", "{work} is at the harbour"]
    assert len(body["inbox"]) == 3
