"""Helpers shared by the ``access_*`` functions: another user's object is a 404, never a 403."""

from __future__ import annotations

from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db import models

from .errors import NotFound

M = TypeVar("M", bound=models.Model)


def owned_or_404(queryset: models.QuerySet[M], *, owner_field: str = "owner", owner: object, **lookup: object) -> M:
    """The one row of ``queryset`` matching ``lookup`` and owned by ``owner``, or NotFound."""
    try:
        return queryset.get(**{owner_field: owner}, **lookup)
    except (ObjectDoesNotExist, ValueError, TypeError):  # get() raises only queryset.model.DoesNotExist
        raise _not_found(queryset.model) from None


def owned_row_or_404(model: type[M], *, join: str | None = None, owner_field: str = "owner_id", owner: Any,
                     **lookup: Any) -> M:
    """``owned_or_404`` for the reads every chat turn makes: one row by a unique key with its ``join`` attached,
    through ``core.db.fetch_one`` (no queryset compiler)."""
    from .db import fetch_one

    try:
        row = fetch_one(model, join=join, **{owner_field: owner}, **lookup)
    except (ValueError, TypeError):
        row = None
    if row is None:
        raise _not_found(model)
    return row


def _not_found(model: type[models.Model]) -> NotFound:
    return NotFound(f"No such {model._meta.verbose_name}.")
