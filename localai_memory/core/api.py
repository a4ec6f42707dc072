"""Small pieces shared by the thin API views."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.views import APIView

from .errors import InvalidInput
from .numbers import whole_number
from .parsers import JSONParser


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


def one_param(request: Any, name: str, default: Any = None) -> Any:
    """The one value of the query parameter ``name`` (``default`` without it). Given twice it is a 400 that
    says so, never one of the values picked silently: ``?memory=keep&memory=delete`` must not delete an
    agent's notes, nor ``?topic=a&topic=b`` forget note b. Every API view reads its query through this."""
    values = request.query_params.getlist(name)
    if len(values) > 1:
        shown = ", ".join(repr(value[:40]) for value in values[:5]) + (", …" if len(values) > 5 else "")
        raise InvalidInput(f"the query parameter {name!r} is given {len(values)} times ({shown}): send it once",
                           code="repeated_parameter")
    return values[0] if values else default


def query_param(request: Any, name: str, *, required: bool = True) -> str | None:
    value = one_param(request, name)
    if value is None and required:
        raise InvalidInput(f"the query parameter {name!r} is required", code="missing_parameter")
    return value


def int_param(request: Any, name: str, *, default: int | None = None, min_value: int = 1,
              max_value: int | None = None) -> int | None:
    """An optional whole-number query parameter (ASCII digits only); anything else is a 400."""
    raw = one_param(request, name)
    if raw is None:
        return default
    value = whole_number(raw)
    if value is None or value < min_value or (max_value is not None and value > max_value):
        top = f" and at most {max_value}" if max_value is not None else ""
        raise InvalidInput(f"{name} must be a whole number of at least {min_value}{top}", code=f"invalid_{name}")
    return value


def bool_param(request: Any, name: str) -> bool | None:
    """An optional true/false query parameter (``true``/``false``/``1``/``0``); anything else is a 400."""
    raw = one_param(request, name)
    if raw is None:
        return None
    if raw in ("true", "1"):
        return True
    if raw in ("false", "0"):
        return False
    raise InvalidInput(f"{name} must be true or false", code=f"invalid_{name}")


class StrictBooleanField(serializers.BooleanField):
    """Only JSON true/false: "yes", 1 or "false" are refused rather than guessed."""

    def to_internal_value(self, data: Any) -> bool:
        if data is True or data is False:
            return data
        self.fail("invalid", input=data)
        raise AssertionError  # unreachable


class NamedChoiceField(serializers.ChoiceField):
    """A choice whose refusal lists the choices ("bogus" is not one of: auto, ask, always, never), so a client
    learns what to send from the error alone."""

    default_error_messages = {"invalid_choice": '"{input}" is not a valid choice: send one of {choices}.'}

    def to_internal_value(self, data: Any) -> Any:
        if data == "" and self.allow_blank:
            return ""
        try:
            return self.choice_strings_to_values[str(data)]
        except KeyError:
            self.fail("invalid_choice", input=data, choices=", ".join(self.choice_strings_to_values))
            raise AssertionError from None  # unreachable


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """Only JSON strings (no numbers turned into text); NUL characters and lone surrogates are refused."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if "\x00" in data:
            raise serializers.ValidationError("may not contain NUL characters")
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            raise serializers.ValidationError("is not valid Unicode text") from None
        return super().to_internal_value(data)


class ApiView(APIView):
    """Base of our API views: JSON only, through the strict parser of ``core.parsers`` (no lone surrogates,
    no nesting deep enough to crash the decoder), whatever the settings' default parsers are."""

    parser_classes = [JSONParser]
