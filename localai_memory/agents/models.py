"""Saved agents and their memory choices (spec: "Memory for each agent")."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AgentMemory(models.TextChoices):
    OWN = "own", "Its own only"
    MINE_AND_OWN = "mine_and_own", "Mine and its own"
    MINE = "mine", "Mine"
    NONE = "none", "None"


class AgentMemorySave(models.TextChoices):
    ALWAYS = "always", "Always confirm"
    NEVER = "never", "Never"


class Agent(models.Model):
    """A saved agent. ``memory`` NULL is "as before" (saved before the field existed); ``memory_save`` NULL
    uses the owner's level."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    instructions = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True, help_text='The Tools list, e.g. ["memory"].')
    addons = models.JSONField(default=list, blank=True, help_text='The Add-ons list, e.g. ["memory"].')
    grants = models.JSONField(default=list, blank=True, help_text='Grants, e.g. ["memory.write"].')
    memory = models.CharField(max_length=20, choices=AgentMemory.choices, null=True, blank=True)
    memory_save = models.CharField(max_length=10, choices=AgentMemorySave.choices, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(memory__isnull=True) | models.Q(memory__in=AgentMemory.values),
                name="agent_memory_known_or_as_before",
            ),
            models.CheckConstraint(
                condition=models.Q(memory_save__isnull=True) | models.Q(memory_save__in=AgentMemorySave.values),
                name="agent_memory_save_stricter_only",
            ),
            models.CheckConstraint(condition=~models.Q(name=""), name="agent_name_not_empty"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def tools_memory(self) -> bool:
        return "memory" in (self.tools or [])

    @property
    def addons_memory(self) -> bool:
        return "memory" in (self.addons or [])

    @property
    def grant_write(self) -> bool:
        return "memory.write" in (self.grants or [])


class DeletedAgent(models.Model):
    """The name a deleted agent had, so the notes it leaves (kept, or restored from the Trash) can say whose
    they were. Agent ids are never reused, so one row per agent id."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="deleted_agents")
    agent_id = models.PositiveBigIntegerField()
    name = models.CharField(max_length=100)
    deleted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "agent_id"], name="deleted_agent_once")]

    def __str__(self) -> str:
        return self.name
