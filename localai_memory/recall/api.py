"""``GET /api/chats/memory/search?q=&scope=``: semantic search of your own notes. A thin view over
``recall.service.search``; it only ever reads the requesting user's rows, and names only their own scopes."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from localai_memory.core.api import ApiView, int_param, one_param, query_param

from . import service


class MemorySearchApi(ApiView):
    @extend_schema(
        parameters=[
            OpenApiParameter("q", OpenApiTypes.STR, required=True,
                             description=f"What to look for (1-{service.QUERY_MAX_CHARS} characters)."),
            OpenApiParameter("scope", OpenApiTypes.STR, required=False,
                             description="user, agent:<id> or channel:<key> (one of yours: another is a 404); "
                                         "leave it out to search all your notes."),
            OpenApiParameter("limit", OpenApiTypes.INT, required=False, description="At most this many (1-50)."),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        """Your notes that match ``q`` by meaning, best first, each with its score and similarity.

        ``mode`` is ``semantic``, or ``lexical`` with the reason in ``degraded`` (``no_embedder``,
        ``no_vectors``, ``low_coverage``, ``dim_mismatch``, ``query_embed_failed``)."""
        from localai_memory.memory.selectors import owned_scope

        query = service.check_query(query_param(request, "q"), name="q")
        raw = one_param(request, "scope")
        # only a scope of the user's own: another user's agent or bot, or none, is a 404 as on every route
        scope = None if raw in (None, "") else owned_scope(user_id=request.user.pk, raw=raw)
        limit = int_param(request, "limit", default=service.SEARCH_LIMIT, min_value=1, max_value=50)
        scopes = [scope] if scope is not None else service.owner_scopes(owner_id=request.user.pk)
        return Response(service.search(owner_id=request.user.pk, scopes=scopes, query=query, limit=limit or 10))
