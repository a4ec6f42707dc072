"""What is the owner's alone stays theirs in the admin: an administrator's restore from the Trash is refused
while the owner's memory is off, and a bot's on/off switch is shown, never turned (an agent's memory choices:
``tests/agents/test_admin_and_schema.py``)."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from localai_memory.memory.services import settings_update
from localai_memory.notes.models import TrashEntry
from localai_memory.notes.paths import Scope
from localai_memory.notes.selectors import index_text
from localai_memory.notes.services import memory_forget, note_upsert


@pytest.fixture
def forgotten(owner) -> TrashEntry:
    """Alice's notes, all moved to the Trash by her Forget everything."""
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="vegan", source="files")
    entry = memory_forget(owner_id=owner.pk)
    assert entry is not None and index_text(owner_id=owner.pk, scope=Scope.user()) == ""
    return entry


def _restore(client, entry: TrashEntry):
    return client.post(reverse("admin:notes_trashentry_changelist"),
                       {"action": "restore", "_selected_action": [entry.pk]}, follow=True)


def test_an_admin_cannot_bring_back_a_forget_everything_while_the_owners_memory_is_off(client, operator, owner,
                                                                                     forgotten):
    settings_update(user_id=owner.pk, enabled=False)

    response = _restore(client, forgotten)

    said = " ".join(str(message) for message in response.context["messages"])
    assert "not restored" in said and "only they can restore it" in said
    forgotten.refresh_from_db()
    assert forgotten.restored_at is None
    assert index_text(owner_id=owner.pk, scope=Scope.user()) == ""
    assert not LogEntry.objects.exists()


def test_an_admin_restores_from_the_trash_while_the_owners_memory_is_on_and_the_log_says_so(client, operator,
                                                                                          owner, forgotten):
    response = _restore(client, forgotten)

    assert any("Restored" in str(message) for message in response.context["messages"])
    forgotten.refresh_from_db()
    assert forgotten.restored_at is not None and forgotten.restored_by.actor == "admin operator"
    assert "lives in Rome" in index_text(owner_id=owner.pk, scope=Scope.user())
    logged = LogEntry.objects.get()
    assert logged.object_repr == f"Trash entry {forgotten.pk} (forget)"
    assert f"change set {forgotten.restored_by_id}" in logged.get_change_message()


@pytest.fixture
def alices_bot(owner):
    from bridges import services as bridges_services

    return bridges_services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot", mode="polling",
                                           credentials={"token": "123456:ALICE-TOKEN-abcd"})


@pytest.mark.parametrize("owners_switch", [False, True])
def test_a_bots_switch_is_its_owners_and_the_admin_only_shows_it(client, operator, alices_bot, owners_switch):
    from bridges import services as bridges_services
    from bridges.models import Binding

    bridges_services.binding_set_enabled(binding=alices_bot, enabled=owners_switch)
    url = reverse("admin:bridges_binding_change", args=[alices_bot.pk])
    assert 'name="enabled"' not in client.get(url).content.decode()
    listed = client.get(reverse("admin:bridges_binding_changelist")).content.decode()
    assert 'value="turn_on"' not in listed and 'value="turn_off"' not in listed

    edited = client.post(url, {"name": "Kitchen bot", "mode": "polling", "agent": "",
                               "enabled": "" if owners_switch else "on"})

    assert edited.status_code == 302
    stored = Binding.objects.get(pk=alices_bot.pk)
    assert (stored.name, stored.enabled) == ("Kitchen bot", owners_switch)
