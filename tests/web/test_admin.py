"""The admin console: its title, and every registered model's list opens (with its search and filters)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert


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


@pytest.mark.parametrize("status", ["confirmed", "pending", "rejected"])
@pytest.mark.parametrize("how", ["its page", "delete selected"])
def test_an_admin_cannot_delete_a_suggestion_and_the_invariants_stay_clean(client, operator, status, how):
    """A confirmed one's change set would name nothing (``change_for_unconfirmed_proposal``); a pending or
    rejected one would go with no decision recorded, and a rejected one could be suggested again."""
    from localai_memory.core.invariants import check_invariants
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import proposal_confirm, proposal_create, proposal_reject

    proposal = proposal_create(owner_id=operator.pk, scope=Scope.user(), topic="home", summary="lives in Rome")
    if status == "confirmed":
        proposal_confirm(owner_id=operator.pk, proposal_id=proposal.pk, actor="you")
    elif status == "rejected":
        proposal_reject(owner_id=operator.pk, proposal_id=proposal.pk, actor="you")

    if how == "its page":
        url = reverse("admin:memory_proposal_delete", args=[proposal.pk])
        assert client.get(url).status_code == 403
        assert client.post(url, {"post": "yes"}).status_code == 403
    else:
        listed = client.get(reverse("admin:memory_proposal_changelist")).content.decode()
        assert 'value="delete_selected"' not in listed and 'value="expire_now"' in listed
        client.post(reverse("admin:memory_proposal_changelist"),
                    {"action": "delete_selected", "_selected_action": [proposal.pk], "post": "yes"})

    assert Proposal.objects.get(pk=proposal.pk).status == status
    assert check_invariants() == []


def test_a_suggestion_an_admin_expires_says_who_dropped_it_and_no_sweep_claims_nobody_answered(client, operator):
    from localai_memory.core.errors import Gone
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import proposal_confirm, proposal_create
    from localai_memory.memory.proposals_api import proposal_json

    proposal = proposal_create(owner_id=operator.pk, scope=Scope.user(), topic="home", summary="lives in Rome")
    response = client.post(reverse("admin:memory_proposal_changelist"),
                           {"action": "expire_now", "_selected_action": [proposal.pk]})

    assert response.status_code == 302
    proposal.refresh_from_db()
    assert proposal.status == Proposal.Status.EXPIRED and proposal.notified  # no sweep announces it
    logged = LogEntry.objects.get(object_id=str(proposal.pk), content_type__model="proposal")
    assert (logged.user, logged.action_flag, logged.object_repr) == (operator, CHANGE, f"proposal {proposal.pk} (expired)")
    assert "dropped by an administrator" in logged.get_change_message()
    assert proposal_json(proposal)["message"] == "Dropped by an administrator."
    with pytest.raises(Gone, match="An administrator dropped this suggestion"):
        proposal_confirm(owner_id=operator.pk, proposal_id=proposal.pk, actor="you")


@pytest.mark.parametrize("bulk", [False, True])
def test_deleting_a_chat_in_the_admin_drops_the_suggestions_waiting_from_it(client, operator, bulk):
    from localai_memory.chats.models import Chat
    from localai_memory.chats.services import chat_create
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import DROPPED_BECAUSE, proposal_create

    chat = chat_create(owner_id=operator.pk)
    proposal = proposal_create(owner_id=operator.pk, scope=Scope.user(), topic="home", summary="lives in Rome",
                               chat_id=chat.pk)
    if bulk:
        response = client.post(reverse("admin:chats_chat_changelist"),
                               {"action": "delete_selected", "_selected_action": [chat.pk], "post": "yes"})
    else:
        response = client.post(reverse("admin:chats_chat_delete", args=[chat.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:chats_chat_changelist")  # back to the list, not the index
    assert not Chat.objects.filter(pk=chat.pk).exists()
    proposal.refresh_from_db()
    assert proposal.status == Proposal.Status.EXPIRED
    assert DROPPED_BECAUSE[proposal.decided_by] == "Dropped: its chat was deleted."


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


@pytest.fixture
def alice_with_memory(make_user):
    """Somebody who used memory: notes (one edited, one in the Trash), a suggestion waiting, her settings, an
    API token, an agent with notes of its own, a chat and a bot."""
    from bridges import services as bridges_services
    from localai_memory.accounts.services import token_create
    from localai_memory.chats.services import chat_create
    from localai_memory.memory.proposals import proposal_create
    from localai_memory.memory.services import settings_update
    from localai_memory.notes.services import file_delete, note_importance_set
    from tests.chats.helpers import make_agent

    alice = make_user("alice")
    note_upsert(owner_id=alice.pk, scope=Scope.user(), topic="home", summary="lives in Rome", source="files")
    note_upsert(owner_id=alice.pk, scope=Scope.user(), topic="home", summary="lives in Milan", source="files")
    note_upsert(owner_id=alice.pk, scope=Scope.user(), topic="diet", summary="vegan",
                details="No meat, no honey.", source="files")
    note_importance_set(owner_id=alice.pk, scope=Scope.user(), topic="diet", importance=0.9)
    file_delete(owner_id=alice.pk, path="Memory/diet.md")
    agent = make_agent(alice)
    note_upsert(owner_id=alice.pk, scope=Scope.agent(agent.pk), topic="style", summary="short answers",
                source="files")
    proposal_create(owner_id=alice.pk, scope=Scope.user(), topic="pets", summary="has a cat")
    settings_update(user_id=alice.pk, save_mode="ask")
    token_create(user=alice)
    chat_create(owner_id=alice.pk)
    bridges_services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot", mode="polling",
                                    credentials={"token": "123456:ALICE-TOKEN-abcd"})
    return alice


def _nothing_left_of(user_id: int) -> None:
    from localai_memory.core.invariants import check_invariants
    from localai_memory.growth.services import memory_leftovers

    assert not get_user_model().objects.filter(pk=user_id).exists()
    assert memory_leftovers(owner_id=user_id) == {}
    assert check_invariants() == []


def test_an_admin_deletes_a_user_who_had_notes_and_nothing_of_them_is_left(
        client, operator, alice_with_memory, make_user, django_capture_on_commit_callbacks):
    bob = make_user("bob")
    note_upsert(owner_id=bob.pk, scope=Scope.user(), topic="home", summary="lives in Oslo", source="files")
    url = reverse("admin:auth_user_delete", args=[alice_with_memory.pk])

    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "permission to delete" not in text and "Yes, I’m sure" in text
    assert "Note file" in text and "Change set" in text  # what goes is listed

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"post": "yes"})

    assert response.status_code == 302
    _nothing_left_of(alice_with_memory.pk)
    from localai_memory.notes.selectors import index_text
    assert "lives in Oslo" in index_text(owner_id=bob.pk, scope=Scope.user())  # only Alice's


def test_an_admin_deletes_users_who_had_notes_with_the_bulk_action(client, operator, alice_with_memory,
                                                                   django_capture_on_commit_callbacks):
    url = reverse("admin:auth_user_changelist")
    asked = client.post(url, {"action": "delete_selected", "_selected_action": [alice_with_memory.pk]})
    assert asked.status_code == 200 and "permission to delete" not in asked.content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"action": "delete_selected", "_selected_action": [alice_with_memory.pk],
                                     "post": "yes"})

    assert response.status_code == 302
    _nothing_left_of(alice_with_memory.pk)
    assert get_user_model().objects.filter(pk=operator.pk).exists()


def test_deleting_a_user_asks_their_memory_addon_to_forget_them(client, operator, make_user, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick, settings_update

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    monkeypatch.delenv("SAMPLE_PROVIDER_BROKEN", raising=False)
    alice = make_user("alice")
    provider_pick(user_id=alice.pk, provider="sample")
    settings_update(user_id=alice.pk, enabled=False)  # switched off, the add-on still keeps what it took
    store = {"garden": "grows tomatoes"}
    monkeypatch.setitem(sample_memory_provider.NOTES, alice.pk, store)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:auth_user_delete", args=[alice.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert store == {}
    _nothing_left_of(alice.pk)


@pytest.mark.django_db(transaction=True)
def test_the_admin_says_so_when_the_memory_addon_could_not_forget_a_deleted_user(client, operator, make_user,
                                                                                 monkeypatch):
    """The add-on is asked once the delete has committed (a real commit here); its failure does not keep the
    account, and the operator is told to clear the add-on by hand."""
    import sample_memory_provider

    from localai_memory.memory.services import provider_pick

    monkeypatch.delenv("SAMPLE_PROVIDER_DOWN", raising=False)
    alice = make_user("alice")
    provider_pick(user_id=alice.pk, provider="sample")
    monkeypatch.setitem(sample_memory_provider.NOTES, alice.pk, {"garden": "grows tomatoes"})
    monkeypatch.setenv("SAMPLE_PROVIDER_BROKEN", "1")

    response = client.post(reverse("admin:auth_user_delete", args=[alice.pk]), {"post": "yes"}, follow=True)

    assert response.status_code == 200
    said = [str(message) for message in response.context["messages"]]
    assert any("alice was deleted, but their memory add-on could not forget" in text for text in said), said
    assert not get_user_model().objects.filter(pk=alice.pk).exists()


@pytest.mark.parametrize("how", ["its page", "delete selected"])
def test_deleting_a_bot_in_the_admin_drops_the_suggestions_waiting_for_its_conversations(client, operator, make_user,
                                                                                         how):
    """As the API's delete does: confirmed later, a suggestion would write into a folder no chat reads."""
    from bridges import services as bridges_services
    from bridges.models import Binding
    from localai_memory.core.errors import Gone
    from localai_memory.memory.models import Proposal
    from localai_memory.memory.proposals import proposal_confirm, proposal_create

    alice = make_user("alice")
    binding = bridges_services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot",
                                              mode="polling", credentials={"token": "123456:ALICE-TOKEN-abcd"})
    waiting = proposal_create(owner_id=alice.pk, scope=Scope.channel(binding.pk, "5550001"), topic="diet",
                              summary="vegan")
    hers = proposal_create(owner_id=alice.pk, scope=Scope.user(), topic="home", summary="lives in Rome")

    if how == "its page":
        response = client.post(reverse("admin:bridges_binding_delete", args=[binding.pk]), {"post": "yes"})
    else:
        response = client.post(reverse("admin:bridges_binding_changelist"),
                                {"action": "delete_selected", "_selected_action": [binding.pk], "post": "yes"})

    assert response.status_code == 302
    assert not Binding.objects.filter(pk=binding.pk).exists()
    waiting.refresh_from_db()
    assert waiting.status == Proposal.Status.EXPIRED
    with pytest.raises(Gone):
        proposal_confirm(owner_id=alice.pk, proposal_id=waiting.pk, actor="you")
    assert Proposal.objects.get(pk=hers.pk).status == Proposal.Status.PENDING  # her own notes' suggestion stays


@pytest.fixture
def alices_bot(make_user):
    from bridges import services as bridges_services

    alice = make_user("alice")
    return bridges_services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot", mode="polling",
                                           credentials={"token": "123456:ALICE-TOKEN-abcd"})


def _agent(owner, name: str):
    from localai_memory.agents.models import Agent

    return Agent.objects.create(owner=owner, name=name, instructions="You cook.")


def _edit_bot(client, binding, **fields):
    data = {"name": binding.name, "mode": binding.mode, "agent": binding.agent_id or "", "enabled": "on", **fields}
    return client.post(reverse("admin:bridges_binding_change", args=[binding.pk]), data)


def test_a_bots_admin_page_offers_only_its_platforms_modes_and_its_owners_agents(client, operator, alices_bot,
                                                                                 make_user):
    hers = _agent(alices_bot.owner, "Cook")
    theirs = _agent(make_user("bob"), "Bob's secret agent")

    page = client.get(reverse("admin:bridges_binding_change", args=[alices_bot.pk])).content.decode()

    assert f'value="{hers.pk}"' in page and "Cook" in page
    assert f'value="{theirs.pk}"' not in page and "Bob&#x27;s secret agent" not in page
    assert 'value="polling"' in page and 'value="webhook"' in page
    assert 'value="socket"' not in page and 'value="gateway"' not in page
    assert 'name="credentials"' not in page and "ALICE-TOKEN" not in page


def test_the_admin_refuses_another_users_agent_or_another_platforms_mode_for_a_bot(client, operator, alices_bot,
                                                                                  make_user):
    from bridges.models import Binding
    theirs = _agent(make_user("bob"), "Bob's secret agent")

    with_their_agent = _edit_bot(client, alices_bot, agent=theirs.pk)
    with_a_slack_mode = _edit_bot(client, alices_bot, mode="socket")

    for response in (with_their_agent, with_a_slack_mode):
        assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    stored = Binding.objects.get(pk=alices_bot.pk)
    assert (stored.agent_id, stored.mode) == (None, "polling")


def test_the_admin_shows_why_a_bot_cannot_switch_to_a_mode_its_credentials_do_not_allow(client, operator, make_user):
    """A Slack bot in Socket Mode has no signing secret, which the Events API needs: the service's reason is
    shown on the form, not a 500, and nothing changes."""
    from bridges import services as bridges_services
    from bridges.models import Binding

    alice = make_user("alice")
    binding = bridges_services.binding_create(owner_id=alice.pk, platform="slack", name="Team bot", mode="socket",
                                              credentials={"bot_token": "xoxb-alice", "app_token": "xapp-alice"})

    response = _edit_bot(client, binding, mode="http")

    assert response.status_code == 200
    assert "mode http needs the credentials signing_secret" in response.content.decode()
    assert Binding.objects.get(pk=binding.pk).mode == "socket"


def test_the_admin_renames_a_bot_and_gives_it_its_owners_agent_without_touching_its_connection(
        client, operator, alices_bot):
    from bridges.models import Binding
    hers = _agent(alices_bot.owner, "Cook")

    response = _edit_bot(client, alices_bot, name="Kitchen bot", agent=hers.pk)

    assert response.status_code == 302
    stored = Binding.objects.get(pk=alices_bot.pk)
    assert (stored.name, stored.agent_id, stored.mode) == ("Kitchen bot", hers.pk, "polling")
    assert stored.credentials == alices_bot.credentials  # the same connection: runbridges does not restart it


def test_a_bots_admin_page_offers_a_write_only_field_for_each_credential_of_its_platform(client, operator,
                                                                                        alices_bot):
    page = client.get(reverse("admin:bridges_binding_change", args=[alices_bot.pk])).content.decode()

    assert 'name="token"' in page and 'type="password"' in page and 'name="webhook_secret"' in page
    assert 'name="bot_token"' not in page and 'name="app_token"' not in page  # Slack's
    assert "ALICE-TOKEN" not in page


def test_a_new_token_entered_in_the_admin_replaces_the_stored_one_and_clears_a_refusal(client, operator, alices_bot):
    from bridges import services as bridges_services
    from bridges.models import Binding
    from bridges.selectors import binding_credentials

    bridges_services.binding_report_revoked(binding_id=alices_bot.pk, code="token_revoked", reason="Refused.")
    refused = Binding.objects.get(pk=alices_bot.pk)

    response = _edit_bot(client, refused, enabled="", token="123456:NEW-TOKEN-efgh")
    kept = _edit_bot(client, Binding.objects.get(pk=alices_bot.pk), enabled="", name="Kitchen bot", token="")

    assert (response.status_code, kept.status_code) == (302, 302)
    stored = Binding.objects.get(pk=alices_bot.pk)
    assert (stored.state, stored.enabled, stored.name) == ("ok", False, "Kitchen bot")  # its switch turns it on
    credentials = binding_credentials(binding=stored)
    assert credentials["token"] == "123456:NEW-TOKEN-efgh"  # a blank field kept it
    assert credentials["webhook_secret"] == binding_credentials(binding=alices_bot)["webhook_secret"]


def test_the_admin_refuses_a_malformed_token_on_its_field_and_changes_nothing(client, operator, alices_bot):
    from bridges.models import Binding

    response = _edit_bot(client, alices_bot, token="not a token")

    assert response.status_code == 200
    assert "credentials.token: a bot token is 8-300 letters" in response.content.decode()
    assert Binding.objects.get(pk=alices_bot.pk).credentials == alices_bot.credentials


def test_the_admin_moves_a_slack_bot_to_the_events_api_with_the_signing_secret_given_alongside(client, operator,
                                                                                              make_user):
    from bridges import services as bridges_services
    from bridges.models import Binding
    from bridges.selectors import binding_credentials

    alice = make_user("alice")
    binding = bridges_services.binding_create(owner_id=alice.pk, platform="slack", name="Team bot", mode="socket",
                                              credentials={"bot_token": "xoxb-alice", "app_token": "xapp-alice"})

    response = _edit_bot(client, binding, mode="http", signing_secret="alice-signing-secret")

    assert response.status_code == 302
    stored = Binding.objects.get(pk=binding.pk)
    assert stored.mode == "http"
    assert binding_credentials(binding=stored)["signing_secret"] == "alice-signing-secret"
