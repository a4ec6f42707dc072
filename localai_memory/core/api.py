"""Small pieces shared by the thin API views."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from .errors import InvalidInput


def validated(serializer_class: type[serializers.Serializer], data: Any, **kwargs: Any) -> dict:
    """Validate ``data`` with ``serializer_class``; unknown fields and non-object bodies are a 400."""
    if not isinstance(data, dict):
        raise InvalidInput("the body must be a JSON object", code="invalid_body")
    known = set(serializer_class().fields)
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidInput(f"unknown field(s): {', '.join(unknown)}", code="unknown_field")
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def query_param(request: Any, name: str, *, required: bool = True) -> str | None:
    value = request.query_params.get(name)
    if value is None and required:
        raise InvalidInput(f"the query parameter {name!r} is required", code="missing_parameter")
    return value


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: "yes", 1 or "false" are refused rather than guessed."""

    def to_internal_value(self, data: Any) -> bool:
        if data is True or data is False:
            return data
        self.fail("invalid", input=data)
        raise AssertionError  # unreachable


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """Only JSON strings (no numbers turned into text); NUL characters are refused."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if "\x00" in data:
            raise serializers.ValidationError("may not contain NUL characters")
        return super().to_internal_value(data)
