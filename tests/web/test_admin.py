"""The admin console: its title, and every registered model's list opens (with its search and filters)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert


@pytest.fixture
def operator(db, client):
    user = get_user_model().objects.create_superuser("operator", "op@example.org", "correct horse battery staple")
    client.force_login(user)
    return user


def test_the_admin_says_whose_console_it_is(client, operator):
    response = client.get("/admin/")
    assert response.status_code == 200
    assert "LocalAI Memory administration" in response.content.decode()


def test_every_registered_model_list_opens_with_its_search_and_filters(client, operator):
    note_upsert(owner_id=operator.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    for model, model_admin in admin.site._registry.items():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        response = client.get(url)
        assert response.status_code == 200, url
        if model_admin.search_fields:
            assert client.get(url, {"q": "rome"}).status_code == 200, url


def test_an_admin_deletes_one_proposal_from_its_page(client, operator):
    """The admin's own Delete button removes a proposal, a note to forget too (its flag once hid
    ``Model.delete()``), and the instance deletes itself as any model does."""
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import proposal_create
    from localai_memory.notes.services import note_upsert

    proposal = proposal_create(owner_id=operator.pk, scope=Scope.user(), topic="home", summary="lives in Rome")
    url = reverse("admin:memory_proposal_delete", args=[proposal.pk])
    assert client.get(url).status_code == 200  # the confirmation page

    response = client.post(url, {"post": "yes"})

    assert response.status_code == 302
    assert not Proposal.objects.filter(pk=proposal.pk).exists()
    note_upsert(owner_id=operator.pk, scope=Scope.user(), topic="diet", summary="vegan", source="files", actor="you")
    forget = proposal_create(owner_id=operator.pk, scope=Scope.user(), topic="diet", delete=True)
    assert forget.is_delete
    forget.delete()
    assert not Proposal.objects.filter(pk=forget.pk).exists()


def test_an_admin_sees_a_persons_memory_choices_but_cannot_change_them(client, operator):
    from bridges.models import Binding, Sender
    from localai_memory.memory.models import MemorySettings
    from localai_memory.memory.services import settings_update

    settings_update(user_id=operator.pk, save_mode="ask")
    row = MemorySettings.objects.get(user=operator)
    url = reverse("admin:memory_memorysettings_change", args=[row.pk])
    assert client.get(url).status_code == 200  # shown

    changed = client.post(url, {"enabled": "on", "save_mode": "auto", "messaging_save": "paired_private"})

    assert changed.status_code == 403
    row.refresh_from_db()
    assert row.save_mode == "ask" and row.messaging_save != "paired_private"
    # Nor delete the row, which would read as the defaults (memory on again).
    assert client.post(reverse("admin:memory_memorysettings_delete", args=[row.pk]), {"post": "yes"}).status_code == 403
    assert MemorySettings.objects.filter(pk=row.pk).exists()

    binding = Binding.objects.create(owner=operator, platform="telegram", name="Home bot", mode="polling")
    sender = Sender.objects.create(binding=binding, external_id="42", display="Alice", status="paired",
                                   paired_at=timezone.now())
    sender_url = reverse("admin:bridges_sender_change", args=[sender.pk])
    renamed = client.post(sender_url, {"name": "Aunt Alice", "can_confirm": "on"})
    assert renamed.status_code == 302  # the form was taken
    sender.refresh_from_db()
    assert sender.name == "Aunt Alice" and sender.can_confirm is False
