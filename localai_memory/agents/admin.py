"""Admin for saved agents. Edits and deletes go through agents.services, so the admin obeys the same rules as
the API (deleting keeps the agent's notes).

What has a say in what an agent reads and saves of its owner's memory — its memory choice, its save rule, its
grants (Remember things), its Tools and Add-ons lists (memory on them) — is shown, never changed here: the
spec has the owner set them in the agent form, and an administrator who could would choose for them, as the
memory settings' admin refuses to. For the same reason an administrator makes no agent for somebody."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages

from localai_memory.accounts.adminlog import OwnedAdmin
from localai_memory.core.errors import InvalidInput

from . import services
from .models import Agent

#: What an administrator may edit, each checked as the API checks it.
_CLEANERS = {
    "name": services.clean_name,
    "instructions": services.clean_instructions,
}


#: The fields that have a say in the policy's reading of the agent (``policy.TurnFacts``' ``agent_*``): the owner's.
OWNERS_CHOICES = ("tools", "addons", "grants", "memory", "memory_save")


class AgentAdminForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = list(_CLEANERS)

    def clean(self) -> dict[str, Any]:
        data = cast("dict[str, Any]", super().clean())  # a ModelForm's clean() returns cleaned_data
        for field, clean in _CLEANERS.items():
            if field in data:
                try:
                    data[field] = clean(data[field])
                except InvalidInput as error:
                    self.add_error(field, error.message)
        return data


class MemoryChoiceFilter(admin.SimpleListFilter):
    title = "memory"
    parameter_name = "memory_choice"

    def lookups(self, request, model_admin):
        return [("as_before", "As before"), *[(value, label) for value, label in Agent._meta.get_field("memory")
                                              .choices]]

    def queryset(self, request, queryset):
        if self.value() == "as_before":
            return queryset.filter(memory__isnull=True)
        if self.value():
            return queryset.filter(memory=self.value())
        return queryset


@admin.register(Agent)
class AgentAdmin(OwnedAdmin):
    form = AgentAdminForm
    list_display = ["id", "name", "owner", "memory_choice", "save_rule", "has_memory_tool", "may_save",
                    "updated_at"]
    list_filter = [MemoryChoiceFilter, "memory_save", "created_at", "updated_at"]
    search_fields = ["name", "instructions", "owner__username"]
    list_select_related = ["owner"]
    # owner: an agent's notes live in its owner's files; moving it to another owner would strand them
    readonly_fields = ["owner", *OWNERS_CHOICES, "created_at", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="Memory", ordering="memory")
    def memory_choice(self, obj: Agent) -> str:
        return obj.get_memory_display() if obj.memory else "As before"

    @admin.display(description="Save rule", ordering="memory_save")
    def save_rule(self, obj: Agent) -> str:
        return obj.get_memory_save_display() if obj.memory_save else "Use my setting"

    @admin.display(description="Memory tool", boolean=True)
    def has_memory_tool(self, obj: Agent) -> bool:
        return obj.tools_memory

    @admin.display(description="Remember things", boolean=True)
    def may_save(self, obj: Agent) -> bool:
        return obj.grant_write

    def save_model(self, request, obj: Agent, form, change: bool) -> None:
        fields = {field: form.cleaned_data[field] for field in _CLEANERS if field in form.cleaned_data}
        saved = services.agent_update(owner_id=obj.owner_id, agent_id=obj.pk, **fields)
        obj.created_at, obj.updated_at = saved.created_at, saved.updated_at

    def delete_model(self, request, obj: Agent) -> None:
        self._said(request, services.agent_delete(owner_id=obj.owner_id, agent_id=obj.pk, memory="keep"))

    def delete_queryset(self, request, queryset) -> None:
        for agent in queryset:
            self._said(request, services.agent_delete(owner_id=agent.owner_id, agent_id=agent.pk, memory="keep"))

    def _said(self, request, deleted: services.AgentDeleted) -> None:
        """What the delete did with the notes, as the web app says it (Django's own line says only "deleted"):
        where the kept notes are, and which memory add-on may still hold some."""
        level = messages.WARNING if deleted.kept_in or deleted.addons else messages.INFO
        self.message_user(request, f"“{deleted.name}”: {deleted.message}", level=level)
