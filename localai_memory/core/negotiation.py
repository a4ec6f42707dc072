"""Content negotiation of the API (its own module: DRF's settings import it while ``rest_framework.views``
loads, so it may import nothing of the app's views)."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer


class LenientFormatNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, except that a ``?format=`` naming no renderer of the route is ignored (DRF answers
    404 "Not found.", which says the route does not exist): every route answers JSON or a file anyway."""

    def filter_renderers(self, renderers: Iterable[BaseRenderer], format: str) -> list[BaseRenderer]:
        renderers = list(renderers)
        return [renderer for renderer in renderers if renderer.format == format] or renderers
