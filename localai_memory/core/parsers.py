"""The one JSON parser of the API: strict JSON that can always be stored and echoed back.

DRF's JSONParser accepts two things that later turn into a 500: lone UTF-16 surrogates (``"\\ud800"`` is valid
JSON but not valid Unicode text, so PostgreSQL and the JSON renderer cannot encode it) and nesting deep enough
to exhaust Python's recursion limit. Both are refused here as a 400 ``parse_error``, before any view sees them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_DEPTH = 64


def _problem(value: Any, *, surrogates: bool = True) -> str | None:
    """What is wrong with decoded JSON, walked without recursion: a lone surrogate (in keys too; when
    ``surrogates``) or nesting past MAX_DEPTH; None when nothing is."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if surrogates and not _encodable(item):
                return "holds text that is not valid Unicode (a lone surrogate escape such as \\ud800)"
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                return f"is nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def json_loads(data: str | bytes) -> Any:
    """``json.loads`` for JSON from outside that is not an API body (an uploaded file, the model server's
    answer, a webhook): nesting past MAX_DEPTH is a ValueError like any other bad JSON, never the
    RecursionError (a 500) that Python's parser or a later walk of the value would raise."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"the JSON is nested deeper than {MAX_DEPTH} levels") from None
    problem = _problem(value, surrogates=False)
    if problem:
        raise ValueError(f"the JSON {problem}")
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class JSONParser(parsers.JSONParser):
    """DRF's strict JSON parser, plus: no lone surrogates, no nesting past MAX_DEPTH."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_DEPTH} levels.") from None
        problem = _problem(data)
        if problem:
            raise ParseError(f"JSON parse error - the body {problem}.")
        return data
