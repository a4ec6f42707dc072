"""Admin of the bridges: look at bindings, senders, conversations and pairing requests; edit a bot.

Bindings are created through the API or the web (their credentials are checked and encrypted there); the
admin never shows credentials, and its edits and deletes call the services: a bot's mode is one its
platform offers and its credentials allow, its agent one of its owner's (as the API checks them), a new
credential (a write-only field: left blank, the stored one stays) has the shape its platform uses, and
deleting a bot drops the suggestions waiting for its conversations, as the API's delete does.

A bot's on/off switch is its owner's (the Bridges page, the API): shown here, never turned. An administrator
who must stop a person's bots suspends the account (unticks "Active" on the user): the bots fall silent, and
come back as their owner left them when it is ticked again. So is "Confirm changes from the chat" a sender's
(the owner gives it), and pairing (the owner approves or denies). A conversation or a pairing request is not
deleted on its own (no service does: what the bot said about a suggestion, and a code's answer, would be lost);
each goes with its bot. A sender is deleted as the API deletes one (``services.sender_delete``).
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from localai_memory.accounts.adminlog import OwnedAdmin, ReadOnlyAdmin
from localai_memory.agents.models import Agent
from localai_memory.core.errors import ApplicationError

from . import services
from .models import PLATFORM_MODES, Binding, Conversation, Mode, PairingRequest, Sender

#: Every credential a bot may have, as the admin's write-only fields name them.
CREDENTIAL_FIELDS = {
    "token": "Bot token (Telegram, Discord)",
    "webhook_secret": "Telegram webhook secret",
    "bot_token": "Slack bot token (xoxb-…)",
    "app_token": "Slack app-level token (xapp-…, Socket Mode)",
    "signing_secret": "Slack signing secret (Events API)",
}


def _credential_field(label: str) -> forms.CharField:
    return forms.CharField(label=label, required=False, strip=True,
                           widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                           help_text="Write-only: never shown. Enter a new one to replace the stored one; leave it "
                                     "blank to keep it. A new credential reconnects the bot.")


class BindingAdminForm(forms.ModelForm):
    """A bot's name, mode, agent, switch and credentials, checked as the API checks them
    (``services.binding_check_changes``): the modes of its platform only, only its owner's agents, credentials
    of the shape its platform uses (only its platform's are offered)."""

    token = _credential_field(CREDENTIAL_FIELDS["token"])
    webhook_secret = _credential_field(CREDENTIAL_FIELDS["webhook_secret"])
    bot_token = _credential_field(CREDENTIAL_FIELDS["bot_token"])
    app_token = _credential_field(CREDENTIAL_FIELDS["app_token"])
    signing_secret = _credential_field(CREDENTIAL_FIELDS["signing_secret"])

    class Meta:
        model = Binding
        fields = ["name", "mode", "agent"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        binding = self.instance
        if binding.pk is None:
            return
        for key in CREDENTIAL_FIELDS:
            if key in self.fields and key not in services.CREDENTIAL_KEYS[binding.platform]:
                del self.fields[key]
        if "mode" in self.fields:
            mode = cast("forms.TypedChoiceField", self.fields["mode"])
            labels = dict(Mode.choices)
            mode.choices = [(value, labels[value]) for value in PLATFORM_MODES[binding.platform]]
        if "agent" in self.fields:
            agent = cast("forms.ModelChoiceField[Agent]", self.fields["agent"])
            agent.queryset = Agent.objects.filter(owner_id=binding.owner_id)

    def clean(self) -> dict[str, Any]:
        data = cast("dict[str, Any]", super().clean())  # a ModelForm's clean() returns cleaned_data
        binding = Binding.objects.filter(pk=self.instance.pk).first()  # as stored: the form wrote over instance
        if binding is None:
            return data
        checks: dict[str, dict[str, Any]] = {}
        credentials = self.credentials()
        for key, value in credentials.items():
            checks[key] = {"credentials": {key: value}}
        if "mode" in self.changed_data and data.get("mode"):
            checks["mode"] = {"mode": data["mode"], "credentials": credentials}
        if "agent" in self.changed_data and "agent" in data:
            checks["agent"] = {"agent_id": data["agent"].pk if data["agent"] else None}
        for field, change in checks.items():
            try:
                services.binding_check_changes(binding=binding, **change)
            except ApplicationError as error:
                self.add_error(field, error.message)
        return data

    def credentials(self) -> dict[str, str]:
        """The credentials entered (a blank field keeps the stored one)."""
        cleaned = getattr(self, "cleaned_data", {})
        return {key: cleaned[key] for key in CREDENTIAL_FIELDS if key in self.fields and cleaned.get(key)}


@admin.register(Binding)
class BindingAdmin(OwnedAdmin):
    list_display = ("name", "platform", "mode", "owner", "enabled", "state", "state_reason", "last_connected_at")
    list_filter = ("platform", "mode", "enabled", "state")
    search_fields = ("name", "owner__username", "bot_identity")
    form = BindingAdminForm
    readonly_fields = ("owner", "platform", "enabled", "credential_keys", "state", "state_code", "state_reason",
                       "state_changed_at", "last_connected_at", "bot_identity", "created_at", "updated_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # credentials are entered through the API or the web, where they are checked

    def get_fields(self, request: HttpRequest, obj: Binding | None = None) -> list[Any]:
        """The model's fields, then the write-only credentials of the bot's platform."""
        platform_keys = services.CREDENTIAL_KEYS[obj.platform] if obj is not None else ()
        fields = [field for field in super().get_fields(request, obj) if field not in CREDENTIAL_FIELDS]
        return fields + [key for key in CREDENTIAL_FIELDS if key in platform_keys]

    def save_model(self, request: HttpRequest, obj: Binding, form: Any, change: bool) -> None:
        """Only what the form changed, through ``services.binding_update`` as the API does it (a mode left as it
        was, or a credential left blank, is not passed: re-storing the credentials would reconnect the bot for
        nothing). New credentials clear a "token refused" state; the bot is turned on by its owner's switch."""
        changes: dict[str, Any] = {}
        for field, argument in (("name", "name"), ("mode", "mode"), ("agent", "agent_id")):
            if field in form.changed_data:
                value = form.cleaned_data[field]
                changes[argument] = (value.pk if value else None) if field == "agent" else value
        credentials = form.credentials()
        if credentials:
            changes["credentials"] = credentials
        if changes:
            saved = services.binding_update(binding=obj, **changes)
            obj.name, obj.mode, obj.agent_id = saved.name, saved.mode, saved.agent_id

    def delete_model(self, request: HttpRequest, obj: Binding) -> None:
        services.binding_delete(binding=obj)  # drops the suggestions waiting for its conversations' notes

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Binding]) -> None:
        for binding in queryset:
            services.binding_delete(binding=binding)


@admin.register(Sender)
class SenderAdmin(OwnedAdmin):
    list_display = ("label", "binding", "status", "can_confirm", "paired_at", "last_seen_at")
    list_filter = ("status", "can_confirm")
    search_fields = ("display", "name", "external_id")
    # "Confirm changes from the chat" is the owner's to give (the Bridges page, the API), not the operator's.
    readonly_fields = ("binding", "external_id", "display", "status", "can_confirm", "paired_at", "created_at",
                       "last_seen_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a sender is whoever writes to the bot

    def save_model(self, request: HttpRequest, obj: Sender, form: Any, change: bool) -> None:
        if "name" in form.changed_data:
            obj.name = services.sender_update(sender=obj, name=form.cleaned_data["name"]).name

    def delete_model(self, request: HttpRequest, obj: Sender) -> None:
        services.sender_delete(sender=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Sender]) -> None:
        for sender in queryset:
            services.sender_delete(sender=sender)


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "binding", "kind", "channel_key", "last_message_at")
    list_filter = ("kind",)
    readonly_fields = ("binding", "external_id", "kind", "title", "channel_key", "chat", "created_at",
                       "last_message_at")


@admin.register(PairingRequest)
class PairingRequestAdmin(ReadOnlyAdmin):
    list_display = ("sender", "binding", "status", "created_at", "expires_at")
    list_filter = ("status",)
    readonly_fields = ("binding", "sender", "code", "status", "created_at", "expires_at", "decided_at")
