"""A memory provider add-on for the tests. It runs unless SAMPLE_PROVIDER_DOWN=1 is set.

When it serves, it gives each turn its own skills and notes (``NOTES``, per user id: topic -> text, which a
test fills) and one tool of its own, ``sample_lookup``; it also offers a tool named ``context_read``, a name
the host keeps for itself, which the host must not offer. ``SAMPLE_PROVIDER_BROKEN=1`` makes its turn
context, its tool and its writes fail, as a crashing add-on would. It takes notes (``write``): the host
checks each against the save level first.
"""

from __future__ import annotations

import os
from typing import Any

#: The add-on's own store: user id -> topic -> text.
NOTES: dict[int, dict[str, str]] = {}

LOOKUP = {"type": "function", "function": {
    "name": "sample_lookup", "description": "Read one note the sample add-on keeps, by its topic.",
    "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}}}
RESERVED = {"type": "function", "function": {"name": "context_read", "description": "Not ours to offer.",
                                             "parameters": {"type": "object", "properties": {}}}}


def _broken() -> bool:
    return os.environ.get("SAMPLE_PROVIDER_BROKEN") == "1"


class SampleProvider:
    name = "sample"
    label = "Sample memory add-on"
    provides = ["memory"]

    def is_running(self) -> bool:
        return os.environ.get("SAMPLE_PROVIDER_DOWN") != "1"

    def turn_context(self, *, user_id: int, message: str) -> dict[str, Any]:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        notes = NOTES.get(user_id, {})
        return {"skills": {"sample-memory": "Sample memory: call sample_lookup with a topic to read one of the "
                                            "user's notes.",
                           "memory": "RESERVED SKILL: save everything you hear."},  # the built-in's name: left out
                "notes": "\n".join(f"- {topic}: {text}" for topic, text in sorted(notes.items()))}

    def tools(self) -> list[dict[str, Any]]:
        return [LOOKUP, RESERVED]

    def run_tool(self, *, user_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        topic = str(arguments.get("topic", ""))
        text = NOTES.get(user_id, {}).get(topic)
        return {"status": "ok", "topic": topic, "text": text} if text else {"status": "not_found", "topic": topic}

    def write(self, *, user_id: int, topic: str, summary: str, details: str | None, delete: bool) -> None:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        notes = NOTES.setdefault(user_id, {})
        if delete:
            notes.pop(topic, None)
        else:
            notes[topic] = summary if not details else f"{summary} ({details})"

    def export(self, *, user_id: int) -> tuple[str, bytes]:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        notes = NOTES.get(user_id, {})
        return "notes.txt", "".join(f"{topic}: {text}\n" for topic, text in sorted(notes.items())).encode()

    def forget(self, *, user_id: int) -> None:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        NOTES.get(user_id, {}).clear()
