"""What an administrator may delete in the admin, and what the admin's log keeps of a person.

A row is deleted there only as the product deletes it (through its service), or not at all; the invariants
hold after. The admin's log names a person's rows by what they are, never by their words, and nothing of the
person is left in it once their account is deleted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.admin.options import ModelAdmin
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from localai_memory.accounts.admin import ACCOUNT_DELETED
from localai_memory.accounts.adminlog import OwnedAdmin
from localai_memory.accounts.models import AdminLogOwner
from localai_memory.accounts.services import token_create
from localai_memory.chats.models import Chat, Message
from localai_memory.chats.services import chat_create, messages_add
from localai_memory.core.invariants import check_invariants, owner_path
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_create
from localai_memory.notes.paths import Scope

from .test_admin import _nothing_left_of, alice_with_memory  # noqa: F401  (the fixture)

SECRET = "my HIV test came back positive"


def _chat_with(owner, text: str = SECRET) -> Chat:
    chat = chat_create(owner_id=owner.pk)
    messages_add(chat=chat, messages=[Message(chat=chat, role="user", content=text, typed_by_user=True),
                                      Message(chat=chat, role="assistant", content="I'm sorry to hear that.")])
    chat.refresh_from_db()
    assert chat.title.startswith("my HIV")  # named after its first message
    return chat


def _delete_page(client, model: str, pk: int):
    return client.post(reverse(f"admin:{model}_delete", args=[pk]), {"post": "yes"})


def _delete_selected(client, model: str, pk: int):
    return client.post(reverse(f"admin:{model}_changelist"),
                       {"action": "delete_selected", "_selected_action": [pk], "post": "yes"})


# --- deletes that would go around the product ----------------------------------------------------------------


def test_a_message_is_not_deleted_on_its_own_and_the_suggestion_made_from_it_stays_with_it(client, operator,
                                                                                           make_user):
    alice = make_user("alice")
    chat = _chat_with(alice)
    message = chat.messages.first()
    suggestion = proposal_create(owner_id=alice.pk, scope=Scope.user(), topic="health", summary="HIV positive",
                                 chat_id=chat.pk)

    assert client.get(reverse("admin:chats_message_delete", args=[message.pk])).status_code == 403
    assert _delete_page(client, "chats_message", message.pk).status_code == 403
    _delete_selected(client, "chats_message", message.pk)

    assert Message.objects.filter(pk=message.pk).exists()
    assert Proposal.objects.get(pk=suggestion.pk).status == Proposal.Status.PENDING
    assert check_invariants() == []


def test_how_far_consolidation_read_a_chat_and_what_each_pass_did_are_not_deleted_in_the_admin(client, operator,
                                                                                              make_user):
    """A watermark gone, the next pass would read the chat again and write its one summary a second time."""
    from localai_memory.growth.models import ChatWatermark, ConsolidationRun

    alice = make_user("alice")
    chat = _chat_with(alice)
    mark = ChatWatermark.objects.create(owner=alice, chat=chat, facts_through=chat.messages.last().pk,
                                        summarised_at=timezone.now(), summary_outcome="proposed")
    run = ConsolidationRun.objects.create(owner=alice, trigger="manual", status="done", started_at=timezone.now())

    for model, pk in (("growth_chatwatermark", mark.pk), ("growth_consolidationrun", run.pk)):
        assert _delete_page(client, model, pk).status_code == 403, model
        _delete_selected(client, model, pk)

    assert ChatWatermark.objects.filter(pk=mark.pk).exists() and ConsolidationRun.objects.filter(pk=run.pk).exists()


def test_a_chat_goes_with_its_messages_and_watermark_through_its_page_and_the_admin_is_back_at_the_list(
        client, operator, make_user):
    from localai_memory.growth.models import ChatWatermark

    alice = make_user("alice")
    chat = _chat_with(alice)
    ChatWatermark.objects.create(owner=alice, chat=chat, facts_through=chat.messages.last().pk)
    url = reverse("admin:chats_chat_delete", args=[chat.pk])

    page = client.get(url).content.decode()
    assert "permission to delete" not in page and "Yes, I’m sure" in page

    response = client.post(url, {"post": "yes"})

    assert response.status_code == 302 and response["Location"] == reverse("admin:chats_chat_changelist")
    assert not Chat.objects.filter(pk=chat.pk).exists() and not Message.objects.filter(chat_id=chat.pk).exists()
    assert not ChatWatermark.objects.filter(chat_id=chat.pk).exists()


def test_a_conversation_or_a_pairing_request_is_not_deleted_alone_but_goes_with_its_bot(client, operator,
                                                                                      make_user):
    from bridges import services as bridges_services
    from bridges.models import Binding, Conversation, PairingRequest

    alice = make_user("alice")
    binding = bridges_services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot",
                                              mode="polling", credentials={"token": "123456:ALICE-TOKEN-abcd"})
    conversation = Conversation.objects.create(binding=binding, external_id="5550001", kind="group",
                                               title="Family", channel_key=f"{binding.pk}-abc")
    sender = bridges_services.sender_seen(binding_id=binding.pk, external_id="42", display="Aunt Alice")
    bridges_services.pairing_offer(sender=sender)
    pairing = PairingRequest.objects.get(sender=sender)

    assert _delete_page(client, "bridges_conversation", conversation.pk).status_code == 403
    assert _delete_page(client, "bridges_pairingrequest", pairing.pk).status_code == 403
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert PairingRequest.objects.filter(pk=pairing.pk).exists()

    page = client.get(reverse("admin:bridges_binding_delete", args=[binding.pk])).content.decode()
    assert "permission to delete" not in page
    assert _delete_page(client, "bridges_binding", binding.pk).status_code == 302
    assert not Binding.objects.filter(pk=binding.pk).exists()
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not PairingRequest.objects.filter(pk=pairing.pk).exists()


def test_a_token_deleted_in_the_admin_is_revoked_and_a_sender_goes_as_the_api_deletes_one(client, operator,
                                                                                         make_user):
    from bridges import services as bridges_services
    from bridges.models import Sender

    alice = make_user("alice")
    key = token_create(user=alice)
    token = alice.api_tokens.get()
    binding = bridges_services.binding_create(owner_id=alice.pk, platform="telegram", name="Family bot",
                                              mode="polling", credentials={"token": "123456:ALICE-TOKEN-abcd"})
    sender = bridges_services.sender_seen(binding_id=binding.pk, external_id="42", display="Aunt Alice")

    revoked = _delete_page(client, "accounts_apitoken", token.pk)
    gone = _delete_selected(client, "bridges_sender", sender.pk)

    assert revoked.status_code == 302 and revoked["Location"] == reverse("admin:accounts_apitoken_changelist")
    assert client.get("/api/chats/memory", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
    assert gone.status_code == 302 and not Sender.objects.filter(pk=sender.pk).exists()


def test_every_admin_of_a_persons_rows_deletes_one_only_through_a_service_and_logs_without_their_words(operator):
    """The rule the tests above check one by one, held for every registered admin: one of a person's rows
    is an ``OwnedAdmin`` (its log entries say what a row is and whose), and one that lets a row be deleted
    deletes it through a service, for one row and for "Delete selected"."""
    request = RequestFactory().get("/admin/")
    request.user = operator
    user_model = get_user_model()
    owned = [(model, model_admin) for model, model_admin in admin.site._registry.items()
             if model is user_model or owner_path(model) is not None]
    assert len(owned) >= 18
    for model, model_admin in owned:
        assert isinstance(model_admin, OwnedAdmin), model
        if model_admin.has_delete_permission(request):
            kind = type(model_admin)
            assert kind.delete_model is not ModelAdmin.delete_model, model
            assert kind.delete_queryset is not ModelAdmin.delete_queryset, model


# --- the admin's log ---------------------------------------------------------------------------------------


def _recent_actions(client) -> str:
    """The admin index's Recent actions (the latest entries of the log, by this administrator)."""
    page = client.get("/admin/").content.decode()
    return page.split('id="recent-actions-module"', 1)[1].split("</div>", 1)[0]


def _log_text() -> str:
    return "\n".join(f"{entry.object_repr} {entry.change_message}" for entry in LogEntry.objects.all())


def test_the_admins_log_names_a_persons_chat_and_suggestion_by_what_they_are_never_by_their_words(
        client, operator, make_user):
    from localai_memory.memory.services import settings_update
    from localai_memory.notes.models import TrashEntry
    from localai_memory.notes.services import note_upsert

    alice = make_user("alice")
    chat = _chat_with(alice)
    suggestion = proposal_create(owner_id=alice.pk, scope=Scope.user(), topic="hiv", summary="HIV positive")
    note_upsert(owner_id=alice.pk, scope=Scope.user(), topic="hiv", summary="HIV positive", details="Since May.",
                source="files")
    note_upsert(owner_id=alice.pk, scope=Scope.user(), topic="hiv", delete=True, source="files")
    settings_update(user_id=alice.pk, save_mode="ask")
    entry = TrashEntry.objects.get(owner=alice)

    assert _delete_page(client, "chats_chat", chat.pk).status_code == 302
    client.post(reverse("admin:memory_proposal_changelist"),
                {"action": "expire_now", "_selected_action": [suggestion.pk]})
    client.post(reverse("admin:notes_trashentry_changelist"), {"action": "restore", "_selected_action": [entry.pk]})

    reprs = sorted(LogEntry.objects.values_list("object_repr", flat=True))
    assert reprs == sorted([f"chat {chat.pk}", f"proposal {suggestion.pk} (expired)", f"Trash entry {entry.pk} ({entry.kind})"])
    assert "hiv" not in _log_text().lower()
    recent = _recent_actions(client)
    assert f"chat {chat.pk}" in recent and "hiv" not in recent.lower()


def test_deleting_an_account_in_the_admin_leaves_no_entry_of_the_admins_log_about_the_person(
        client, operator, alice_with_memory, make_user, django_capture_on_commit_callbacks):  # noqa: F811
    from bridges import services as bridges_services
    from bridges.models import Binding
    from localai_memory.agents.models import Agent

    alice = alice_with_memory
    bob = make_user("bob")
    chat = _chat_with(alice)
    binding = Binding.objects.get(owner=alice)
    sender = bridges_services.sender_seen(binding_id=binding.pk, external_id="42", display="Aunt Alice")
    assert _delete_page(client, "chats_chat", chat.pk).status_code == 302  # gone before the account
    client.post(reverse("admin:memory_proposal_changelist"),
                {"action": "expire_now", "_selected_action": list(Proposal.objects.filter(owner=alice).values_list("pk", flat=True))})
    client.post(reverse("admin:bridges_sender_change", args=[sender.pk]), {"name": "Aunt Alice Rossi"})
    client.post(reverse("admin:auth_user_password_change", args=[alice.pk]),
                {"password1": "purple elephant marmalade 42", "password2": "purple elephant marmalade 42"})
    # an entry Django wrote as it does by itself (an entry from before, of a row still there)
    LogEntry.objects.log_actions(user_id=operator.pk, queryset=[Agent.objects.get(owner=alice)], action_flag=2)
    bobs = chat_create(owner_id=bob.pk, title="Bob's plans")
    assert _delete_page(client, "chats_chat", bobs.pk).status_code == 302
    about_alice = LogEntry.objects.exclude(object_id=str(bobs.pk))
    assert about_alice.count() >= 5

    with django_capture_on_commit_callbacks(execute=True):
        response = _delete_page(client, "auth_user", alice.pk)

    assert response.status_code == 302
    _nothing_left_of(alice.pk)
    left = set(LogEntry.objects.values_list("object_id", "object_repr", "user_id"))
    assert left == {(str(bobs.pk), f"chat {bobs.pk}", operator.pk),
                    (None, ACCOUNT_DELETED, operator.pk)}  # it names nobody
    assert not AdminLogOwner.objects.filter(owner_id=alice.pk).exists()
    recent = _recent_actions(client)
    assert ACCOUNT_DELETED in recent and "alice" not in recent.lower()


def test_recent_actions_say_only_that_an_account_was_deleted_and_the_entry_keeps_who_deleted_it_and_when(
        client, operator, make_user, django_capture_on_commit_callbacks):
    """The privacy rule keeps nothing of a deleted person in the admin's log; what an administrator did stays
    accountable: one entry per account, worded so it cannot be read as naming anybody."""
    alice, bob = make_user("alice"), make_user("bob")
    deleted_at = datetime(2026, 3, 9, 14, 30, tzinfo=UTC)

    with time_machine.travel(deleted_at, tick=False), django_capture_on_commit_callbacks(execute=True):
        assert _delete_page(client, "auth_user", alice.pk).status_code == 302
        assert _delete_selected(client, "auth_user", bob.pk).status_code == 302

    said = "Deleted: An account, deleted with everything in it; who it was is not kept User"
    recent = _recent_actions(client)
    items = [" ".join(re.sub(r"<[^>]+>", " ", item).split())
             for item in re.findall(r"<li.*?</li>", recent, re.DOTALL)]
    assert items == [said, said]
    assert "href" not in recent and "alice" not in recent.lower() and "bob" not in recent.lower()
    entries = list(LogEntry.objects.values_list("user_id", "action_time", "object_id", "change_message"))
    assert entries == [(operator.pk, deleted_at, None, "")] * 2


def test_deleting_ones_own_account_deletes_the_admins_log_about_them_too(client, operator, make_user):
    from localai_memory.accounts.services import account_delete_by_owner

    alice = make_user("alice")
    chat = _chat_with(alice)
    assert _delete_page(client, "chats_chat", chat.pk).status_code == 302
    client.post(reverse("admin:auth_user_password_change", args=[alice.pk]),
                {"password1": "purple elephant marmalade 42", "password2": "purple elephant marmalade 42"})
    assert LogEntry.objects.count() == 2
    alice.refresh_from_db()

    account_delete_by_owner(user=alice, password="purple elephant marmalade 42", username="alice")

    assert not LogEntry.objects.exists()


def test_entries_written_before_lose_the_words_they_held(operator, make_user):
    """The migration that brought this in renames the entries already in the log (its function, run here)."""
    import importlib

    from django.apps import apps
    from django.contrib.contenttypes.models import ContentType

    scrub = importlib.import_module("localai_memory.accounts.migrations.0002_admin_log_owner").scrub_log_names
    alice = make_user("alice")
    chat = _chat_with(alice)
    message = chat.messages.first()
    for row, words in ((message, f"user: {SECRET}"), (chat, SECRET), (alice, "alice")):
        LogEntry.objects.create(user=operator, content_type=ContentType.objects.get_for_model(row),
                                object_id=str(row.pk), object_repr=words, action_flag=3)

    scrub(apps, None)

    assert sorted(LogEntry.objects.values_list("object_repr", flat=True)) == sorted(
        [f"message {message.pk}", f"chat {chat.pk}", "alice"])


@pytest.mark.parametrize("how", ["its page", "delete selected"])
def test_an_admin_deletes_a_user_and_the_invariant_checker_stays_clean(
        client, operator, alice_with_memory, how, django_capture_on_commit_callbacks):  # noqa: F811
    with django_capture_on_commit_callbacks(execute=True):
        if how == "its page":
            response = _delete_page(client, "auth_user", alice_with_memory.pk)
        else:
            response = _delete_selected(client, "auth_user", alice_with_memory.pk)
    assert response.status_code == 302
    assert check_invariants() == []
    assert LogEntry.objects.get().object_repr == ACCOUNT_DELETED
