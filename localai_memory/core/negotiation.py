"""Content negotiation of the API (its own module: DRF's settings import it while ``rest_framework.views``
loads, so it may import nothing of the app's views)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer


class LenientFormatNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, except that what no renderer of the route matches is ignored rather than refused:
    a ``?format=`` (DRF answers 404 "Not found.", which says the route does not exist) or an ``Accept``
    (406; a streaming client sends ``Accept: text/event-stream`` for ``/v1/chat/completions``, whose view
    streams the events itself). Every route answers JSON, a file or its own stream anyway."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: str | None = None) -> Any:
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            renderers = list(renderers)
            return renderers[0], renderers[0].media_type

    def filter_renderers(self, renderers: Iterable[BaseRenderer], format: str) -> list[BaseRenderer]:
        renderers = list(renderers)
        return [renderer for renderer in renderers if renderer.format == format] or renderers
