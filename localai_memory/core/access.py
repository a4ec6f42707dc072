"""Helpers shared by the ``access_*`` functions: another user's object is a 404, never a 403."""

from __future__ import annotations

from typing import TypeVar

from django.db import models

from .errors import NotFound

M = TypeVar("M", bound=models.Model)


def owned_or_404(queryset: models.QuerySet[M], *, owner_field: str = "owner", owner: object, **lookup: object) -> M:
    """The one row of ``queryset`` matching ``lookup`` and owned by ``owner``, or NotFound."""
    try:
        return queryset.get(**{owner_field: owner}, **lookup)
    except (queryset.model.DoesNotExist, ValueError, TypeError):
        raise NotFound(f"No such {queryset.model._meta.verbose_name}.") from None
