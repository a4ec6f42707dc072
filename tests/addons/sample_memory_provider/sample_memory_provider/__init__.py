"""A memory provider add-on for the tests. It runs unless SAMPLE_PROVIDER_DOWN=1 is set.

It offers itself only to the test suite: unless ``SAMPLE_PROVIDER_ENABLED=1`` (set by the root conftest.py) it
serves no slot (``provides`` is empty), so the host does not list it. ``make`` installs it into the one
virtualenv that ``make run`` serves from too, and its notes live in a dict of one process (each web worker
has its own; a restart empties them): never a place a person could keep notes.

When it serves, it gives each turn its own skills and notes and one tool of its own, ``sample_lookup``; it also
offers a tool named ``context_read``, a name the host keeps for itself, which the host must not offer.
``SAMPLE_PROVIDER_BROKEN=1`` makes its turn context, its tool and its writes fail, as a crashing add-on would.
It takes notes (``write``): the host checks each against the save level first.

It keeps notes apart per namespace (``namespaces = True``): the host passes the namespaces a turn may read
(``user``, ``agent:<id>``, ``channel:<key>``, as the agent's memory choice allows) to ``turn_context`` and
``run_tool``, and the one a note goes to to ``write``; ``forget_namespace`` drops one (a deleted agent's). ``NOTES`` holds the user's own notes (namespace
``user``, per user id: topic -> text, which a test fills) and ``SCOPED`` the others. With
``SAMPLE_PROVIDER_ONE_STORE=1`` it is an add-on written before namespaces: one store per user (``NOTES``), and
a namespace passed to it is an unexpected keyword (a TypeError), as it would be for such an add-on.
"""

from __future__ import annotations

import os
from typing import Any

#: The add-on's own store of each user's own notes (namespace ``user``): user id -> topic -> text.
NOTES: dict[int, dict[str, str]] = {}
#: The notes of the other namespaces: (user id, ``agent:<id>`` or ``channel:<key>``) -> topic -> text.
SCOPED: dict[tuple[int, str], dict[str, str]] = {}

LOOKUP = {"type": "function", "function": {
    "name": "sample_lookup", "description": "Read one note the sample add-on keeps, by its topic.",
    "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}}}
RESERVED = {"type": "function", "function": {"name": "context_read", "description": "Not ours to offer.",
                                             "parameters": {"type": "object", "properties": {}}}}


def _broken() -> bool:
    return os.environ.get("SAMPLE_PROVIDER_BROKEN") == "1"


def _store(user_id: int, namespace: str) -> dict[str, str]:
    if namespace == "user":
        return NOTES.setdefault(user_id, {})
    return SCOPED.setdefault((user_id, namespace), {})


def _enabled() -> bool:
    return os.environ.get("SAMPLE_PROVIDER_ENABLED") == "1"


class SampleProvider:
    name = "sample"
    label = "Sample memory add-on"

    @property
    def provides(self) -> list[str]:
        """The memory slot under the test suite only: the host lists an add-on by the slots it serves."""
        return ["memory"] if _enabled() else []

    @property
    def namespaces(self) -> bool:
        return os.environ.get("SAMPLE_PROVIDER_ONE_STORE") != "1"

    def _read(self, namespaces: list[str] | None) -> list[str]:
        """The namespaces to read: those the host passed, or the one store of an add-on without namespaces."""
        if not self.namespaces:
            if namespaces is not None:
                raise TypeError("got an unexpected keyword argument 'namespaces'")
            return ["user"]
        return list(namespaces or ["user"])

    def is_running(self) -> bool:
        return os.environ.get("SAMPLE_PROVIDER_DOWN") != "1"

    def turn_context(self, *, user_id: int, message: str, namespaces: list[str] | None = None) -> dict[str, Any]:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        lines = [f"- {topic}: {text}" for namespace in self._read(namespaces)
                 for topic, text in sorted(_store(user_id, namespace).items())]
        return {"skills": {"sample-memory": "Sample memory: call sample_lookup with a topic to read one of the "
                                            "user's notes.",
                           "memory": "RESERVED SKILL: save everything you hear."},  # the built-in's name: left out
                "notes": "\n".join(lines)}

    def tools(self) -> list[dict[str, Any]]:
        return [LOOKUP, RESERVED]

    def run_tool(self, *, user_id: int, name: str, arguments: dict[str, Any],
                 namespaces: list[str] | None = None) -> dict[str, Any]:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        topic = str(arguments.get("topic", ""))
        for namespace in self._read(namespaces):
            text = _store(user_id, namespace).get(topic)
            if text:
                return {"status": "ok", "topic": topic, "text": text}
        return {"status": "not_found", "topic": topic}

    def write(self, *, user_id: int, topic: str, summary: str, details: str | None, delete: bool,
              namespace: str | None = None) -> None:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        if not self.namespaces and namespace is not None:
            raise TypeError("write() got an unexpected keyword argument 'namespace'")
        notes = _store(user_id, namespace or "user")
        if delete:
            notes.pop(topic, None)
        else:
            notes[topic] = summary if not details else f"{summary} ({details})"

    def export(self, *, user_id: int) -> tuple[str, bytes]:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        lines = [f"{topic}: {text}\n" for topic, text in sorted(NOTES.get(user_id, {}).items())]
        lines += [f"{namespace} {topic}: {text}\n" for (owner, namespace), notes in sorted(SCOPED.items())
                  if owner == user_id for topic, text in sorted(notes.items())]
        return "notes.txt", "".join(lines).encode()

    def forget_namespace(self, *, user_id: int, namespace: str) -> None:
        """Drop the notes of one namespace (a deleted agent's ``agent:<id>``)."""
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        if namespace == "user":
            NOTES.get(user_id, {}).clear()
        else:
            SCOPED.pop((user_id, namespace), None)

    def forget(self, *, user_id: int) -> None:
        if _broken():
            raise RuntimeError("the sample add-on is broken")
        NOTES.get(user_id, {}).clear()
        for (owner, _namespace), notes in SCOPED.items():
            if owner == user_id:
                notes.clear()
