"""Memory growth over the API: "Synthesize now", the stats, and import. Thin views over the services."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from localai_memory.core.api import ApiView, StrictBooleanField, validated
from localai_memory.core.errors import InvalidInput
from localai_memory.core.middleware import takes_a_file
from localai_memory.core.parsers import JSONParser
from localai_memory.memory.selectors import MemoryState, memory_state
from localai_memory.memory.services import settings_update

from . import importing
from .consolidation import consolidate_user
from .import_answer import import_answer, import_upload, read_upload
from .models import ConsolidationRun
from .selectors import memory_stats


class ConsolidateApi(ApiView):
    class InputSerializer(serializers.Serializer):
        background = StrictBooleanField(required=False, default=False)

    @extend_schema(request=InputSerializer, responses={200: OpenApiTypes.OBJECT, 202: OpenApiTypes.OBJECT})
    def post(self, request):
        """Synthesize now: suggest notes from your recent chats. Every result waits in the inbox.

        The pass runs in the request and answers what it did; with ``{"background": true}`` it is queued for
        the worker instead (202), for a slow model.
        """
        data = validated(self.InputSerializer, request.data)
        if data["background"]:
            from .tasks import consolidate_user_task

            consolidate_user_task.delay(owner_id=request.user.pk, trigger=ConsolidationRun.Trigger.MANUAL)
            return Response({"status": "queued"}, status=202)
        result = consolidate_user(owner_id=request.user.pk, trigger=ConsolidationRun.Trigger.MANUAL)
        return Response(result.as_dict())


class GrowingApi(ApiView):
    """How memory grows besides the model's proposals: suggestions from chats (the consolidation passes) and
    notes proposed by MCP clients. The Memory tab's "Growing" section, over the API."""

    class InputSerializer(serializers.Serializer):
        consolidation_enabled = StrictBooleanField(required=False)
        mcp_propose_enabled = StrictBooleanField(required=False)

    @staticmethod
    def _answer(state: MemoryState) -> dict[str, bool]:
        return {"consolidation_enabled": state.consolidation_enabled,
                "mcp_propose_enabled": state.mcp_propose_enabled}

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Whether passes over your chats suggest notes, and whether MCP clients may propose notes."""
        return Response(self._answer(memory_state(user_id=request.user.pk)))

    @extend_schema(request=InputSerializer, responses={200: OpenApiTypes.OBJECT})
    def put(self, request):
        """Change either; a field left out stays as it is."""
        data = validated(self.InputSerializer, request.data)
        return Response(self._answer(settings_update(user_id=request.user.pk, **data)))


class StatsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Per scope: lines and bytes against the caps, topics, proposals waiting, last change."""
        return Response(memory_stats(owner_id=request.user.pk))


@takes_a_file
class ImportApi(ApiView):
    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": {"type": "object", "properties": {
                     "file": {"type": "string", "format": "binary"},
                     "facts": {"type": "string"}}},
                 "application/json": {"type": "object", "properties": {"facts": {"type": "string"}}}},
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        """Import an export zip (multipart ``file``) or a list of facts (``facts``: one a line).

        Into an account without notes a zip is written back exactly; otherwise topics are merged and every
        difference waits as a proposal. Refused as a whole (422 with the current entries) past a cap. An
        agent's or a conversation's folder of an export made in your account goes back to your agent (bot) of
        its id, renamed since or not (``renamed``); of any other export, to your agent (bot) of the name the
        export records (``moved``), never to an id of another account. The notes of an agent deleted since go
        to the notes kept from it (``deleted_agents``), a conversation of a bot you removed to the notes left from
        it (``removed_bots``); a folder with no such place is listed under
        ``skipped`` with the reason, and not written. Each suggestion left in the inbox is listed under
        ``inbox`` with its ``expires_at`` (unanswered by then, it is not saved); ``message`` says it all in words.
        """
        upload = request.FILES.get("file") if hasattr(request, "FILES") else None
        data = request.data
        if upload is not None:
            result = import_upload(owner_id=request.user.pk, data=read_upload(upload), name=upload.name or "")
            return Response(import_answer(owner_id=request.user.pk, result=result).as_dict())
        facts = data.get("facts") if hasattr(data, "get") else None
        if isinstance(facts, str) and "\ufffd" in facts and request.content_type.startswith("multipart/"):
            # Django reads a form field's bytes that are not UTF-8 as U+FFFD: refused as the same bytes
            # sent as ``file`` are, rather than saved as replacement characters.
            raise InvalidInput("The facts are not UTF-8 text.", code="invalid_import")
        if isinstance(facts, list) and all(isinstance(item, str) for item in facts):
            facts = "\n".join(facts)
        if not isinstance(facts, str):
            raise InvalidInput("Send a zip as multipart 'file', or {\"facts\": \"one fact a line\"}.",
                               code="invalid_import")
        if hasattr(data, "keys") and set(data.keys()) - {"facts"}:
            raise InvalidInput(f"unknown field(s): {', '.join(sorted(set(data.keys()) - {'facts'}))}",
                               code="unknown_field")
        result = importing.import_facts(owner_id=request.user.pk, text=facts, actor="you")
        return Response(import_answer(owner_id=request.user.pk, result=result).as_dict())
