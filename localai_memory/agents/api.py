"""The agents API (``/api/chats/agents…``): thin views over agents.services / agents.selectors.

A view checks the shape of the input (types, known fields), calls one service or selector and renders the
answer. The values themselves (names, lists, memory choices, the save rule) are checked by the services, so
the admin and an import file obey the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpResponse
from django.urls import reverse
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from localai_memory.core.api import NamedChoiceField, StrictCharField, query_param, validated
from localai_memory.core.errors import InvalidInput, TooLarge
from localai_memory.core.parsers import JSONParser, json_loads
from localai_memory.memory.selectors import MemoryState, memory_state

from . import selectors, services
from .models import Agent, AgentMemory

IMPORT_MAX_BYTES = 256 * 1024

# --------------------------------------------------------------------------------------------------------
# Serializers (input shape and the schema; values are checked again by the services)
# --------------------------------------------------------------------------------------------------------


def _name_list(label: str) -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(max_length=64), max_length=services.LIST_MAX_ITEMS, required=False,
        help_text=f"{label}: lower-case names (letters, digits, . _ : -).",
    )


@extend_schema_field({"type": "string", "pattern": "^(always|never|use_mine)$", "nullable": True,
                      "description": "The rule When it wants to save a note: always (Always confirm) or never. "
                                     "use_mine (or null) clears it and follows your level. auto and ask are a "
                                     "400: an agent can only be stricter than you. Left out of a PUT: kept."})
class AgentRuleField(StrictCharField):
    """Any text through; ``services.clean_memory_save`` says why auto/ask are refused."""


MEMORY_HELP = ("own, mine_and_own, mine or none; null (or left out when creating) is as before. Left out of a "
               "PUT: kept.")


class AgentCreateInput(serializers.Serializer):
    name = StrictCharField(max_length=services.NAME_MAX_CHARS)
    instructions = StrictCharField(required=False, allow_blank=True, trim_whitespace=False,
                                   max_length=services.INSTRUCTIONS_MAX_CHARS)
    tools = _name_list('The Tools list; "memory" turns memory on for the agent. Default ["memory"]')
    addons = _name_list("The Add-ons list. Default []")
    grants = _name_list('Grants; "memory.write" is Remember things. Default ["memory.write"]')
    memory = NamedChoiceField(choices=AgentMemory.values, allow_null=True, required=False, help_text=MEMORY_HELP)
    memory_save = AgentRuleField(required=False, allow_null=True, allow_blank=True)  # "" is refused by the service, by name


class AgentUpdateInput(AgentCreateInput):
    name = StrictCharField(max_length=services.NAME_MAX_CHARS, required=False)


class MemoryEffectiveOutput(serializers.Serializer):
    on = serializers.BooleanField(help_text="A web chat with this agent reads notes now.")
    code = serializers.CharField(allow_null=True, help_text="Why memory is off (the narrowest level), else null.")
    blocked_by = serializers.CharField(allow_null=True)
    fix = serializers.CharField(allow_null=True, help_text="What you can do about it.")
    memory_off_in_settings = serializers.BooleanField(help_text="Your own switch is off.")
    notice = serializers.CharField(allow_null=True, help_text='"Memory is off in your settings", else null.')
    reads = serializers.ListField(child=serializers.CharField(), help_text="user, agent: whose notes it reads.")
    saves_to = serializers.ListField(child=serializers.CharField(), help_text="Where a note may go.")
    save_level = serializers.CharField(help_text="auto, ask, always or never: the strictest that applies.")
    save_code = serializers.CharField(allow_null=True)
    save_message = serializers.CharField(allow_null=True)


class AgentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    instructions = serializers.CharField()
    tools = serializers.ListField(child=serializers.CharField())
    addons = serializers.ListField(child=serializers.CharField())
    grants = serializers.ListField(child=serializers.CharField())
    memory = serializers.ChoiceField(choices=AgentMemory.values, allow_null=True, help_text="null: as before.")
    memory_save = serializers.ChoiceField(choices=["always", "never"], allow_null=True,
                                          help_text="null: uses your setting.")
    memory_effective = MemoryEffectiveOutput(help_text="Read-only hints for the form.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class AgentListOutput(serializers.Serializer):
    agents = AgentOutput(many=True)


class AgentFileAgent(serializers.Serializer):
    name = serializers.CharField()
    instructions = serializers.CharField()
    tools = serializers.ListField(child=serializers.CharField())
    addons = serializers.ListField(child=serializers.CharField())
    grants = serializers.ListField(child=serializers.CharField())
    memory = serializers.ChoiceField(choices=AgentMemory.values, allow_null=True)
    memory_save = serializers.ChoiceField(choices=["always", "never"], allow_null=True)


class AgentFile(serializers.Serializer):
    format = serializers.CharField(help_text=f"Always {selectors.EXPORT_FORMAT!r}.")
    version = serializers.IntegerField(help_text=f"The file version; this server reads {selectors.EXPORT_VERSION}.")
    exported_at = serializers.DateTimeField(required=False)
    agent = AgentFileAgent()


class AgentDeletedOutput(serializers.Serializer):
    id = serializers.IntegerField()
    deleted = serializers.BooleanField()
    memory = serializers.CharField(help_text="What happened to the notes: keep, delete, or none (the agent had "
                                             "none).")
    files = serializers.IntegerField(help_text="How many note files the agent had.")
    trash_id = serializers.IntegerField(allow_null=True, help_text="The Trash entry holding the notes.")
    addons = serializers.ListField(child=serializers.DictField(), help_text=(
        "Each memory add-on that keeps notes per agent, asked to drop this agent's (Delete, or no notes here): "
        "{name, label, status, message}; status forgot, failed, not_running, not_installed or no_forget."))
    message = serializers.CharField()


def agent_json(agent: Agent, state: MemoryState) -> dict:
    return {
        "id": agent.pk,
        **selectors.agent_fields(agent),
        "memory_effective": selectors.agent_memory_effective(agent=agent, state=state),
        "created_at": agent.created_at.isoformat(),
        "updated_at": agent.updated_at.isoformat(),
    }


def _attachment_name(agent: Agent, suffix: str) -> str:
    return f"agent-{agent.pk}-{slugify(agent.name)[:40] or 'agent'}{suffix}"


# --------------------------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------------------------

AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.INT, OpenApiParameter.PATH)
DELETE_MEMORY = OpenApiParameter(
    "memory", OpenApiTypes.STR, OpenApiParameter.QUERY, required=False, enum=list(services.DELETE_CHOICES),
    description="What to do with the agent's notes (Memory/agents/<id>/): keep (they list under Deleted agents), "
                "export (the answer is a zip of them; then they go to the Trash) or delete (the Trash). Without it "
                "the notes are kept.",
)


class AgentListApi(APIView):
    @extend_schema(operation_id="agents_list", responses={200: AgentListOutput})
    def get(self, request):
        """Your saved agents (never another user's)."""
        state = memory_state(user_id=request.user.pk)
        agents = selectors.agent_list(owner_id=request.user.pk)
        return Response({"agents": [agent_json(agent, state) for agent in agents]})

    @extend_schema(operation_id="agents_create", request=AgentCreateInput, responses={201: AgentOutput})
    def post(self, request):
        """Save a new agent. Without memory it is "as before"; without tools/grants it has the memory tool
        and the grant memory.write."""
        data = validated(AgentCreateInput, request.data)
        agent = services.agent_create(owner_id=request.user.pk, **data)
        response = Response(agent_json(agent, memory_state(user_id=request.user.pk)), status=status.HTTP_201_CREATED)
        response["Location"] = reverse("agents-detail", kwargs={"agent_id": agent.pk})
        return response


class AgentDetailApi(APIView):
    @extend_schema(operation_id="agents_read", parameters=[AGENT_ID], responses={200: AgentOutput})
    def get(self, request, agent_id: int):
        """One agent."""
        agent = selectors.access_agent(request.user.pk, agent_id)
        return Response(agent_json(agent, memory_state(user_id=request.user.pk)))

    @extend_schema(operation_id="agents_update", parameters=[AGENT_ID], request=AgentUpdateInput,
                   responses={200: AgentOutput})
    def put(self, request, agent_id: int):
        """Change the fields sent; a field left out keeps its stored value (memory and memory_save too)."""
        data = validated(AgentUpdateInput, request.data)
        agent = services.agent_update(owner_id=request.user.pk, agent_id=agent_id, **data)
        return Response(agent_json(agent, memory_state(user_id=request.user.pk)))

    @extend_schema(
        operation_id="agents_delete", parameters=[AGENT_ID, DELETE_MEMORY],
        responses={(200, "application/json"): AgentDeletedOutput, (200, "application/zip"): OpenApiTypes.BINARY},
    )
    def delete(self, request, agent_id: int):
        """Delete an agent; ``?memory=keep|export|delete`` says what happens to its notes."""
        body = request.data
        if isinstance(body, Mapping) and "memory" in body:  # read as no choice, the notes would stay silently
            raise InvalidInput("send the choice of the agent's notes in the address (?memory=keep, export or "
                               "delete), not in the body: nothing was deleted", code="memory_in_body")
        choice = query_param(request, "memory", required=False)
        result = services.agent_delete(owner_id=request.user.pk, agent_id=agent_id, memory=choice)
        if result.archive is not None:
            response = HttpResponse(result.archive, content_type="application/zip")
            name = f"agent-{result.agent_id}-{slugify(result.name)[:40] or 'agent'}-notes.zip"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
        return Response({"id": result.agent_id, "deleted": True, "memory": result.memory, "files": result.files,
                         "trash_id": result.trash_id, "addons": [answer.as_dict() for answer in result.addons],
                         "message": result.message})


class AgentExportApi(APIView):
    @extend_schema(operation_id="agents_export", parameters=[AGENT_ID], responses={200: AgentFile})
    def get(self, request, agent_id: int):
        """The agent as a JSON file (its memory choices included, no notes), for an import."""
        agent = selectors.access_agent(request.user.pk, agent_id)
        response = Response(selectors.agent_export(agent=agent))
        response["Content-Disposition"] = f'attachment; filename="{_attachment_name(agent, ".json")}"'
        return response


class AgentImportApi(APIView):
    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(
        operation_id="agents_import",
        request={
            "application/json": AgentFile,
            "multipart/form-data": inline_serializer("AgentImportUpload", {"file": serializers.FileField()}),
        },
        responses={201: AgentOutput},
    )
    def post(self, request):
        """A new agent from an export file (the JSON body, or an upload named file): the same choices, no
        notes."""
        data = request.data
        is_upload = bool(request.FILES) or (hasattr(data, "keys") and "file" in data)
        document = _uploaded_document(request) if is_upload else data
        agent = services.agent_import(owner_id=request.user.pk, document=document)
        response = Response(agent_json(agent, memory_state(user_id=request.user.pk)), status=status.HTTP_201_CREATED)
        response["Location"] = reverse("agents-detail", kwargs={"agent_id": agent.pk})
        return response


def _uploaded_document(request) -> object:
    upload = request.FILES.get("file")
    if upload is None or set(request.data) != {"file"}:
        raise InvalidInput("send the agent file as one upload named file", code="invalid_agent_file")
    if upload.size > IMPORT_MAX_BYTES:
        raise TooLarge(f"an agent file is at most {IMPORT_MAX_BYTES // 1024} KiB")
    try:
        return json_loads(upload.read().decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or nested too deep
        raise InvalidInput("the agent file is not JSON", code="invalid_agent_file") from None
