"""Memory providers: Built-in, Off, and add-ons that declare they serve the ``memory`` slot.

An add-on is a Python package with an entry point in the group ``localai_memory.providers``. The entry point
loads an object (a class or an instance) with ``name``, ``label``, ``provides`` (a list of slots, e.g.
``["memory"]``) and ``is_running() -> bool``. When the chosen add-on is missing or not running, memory is off
with code ``memory_provider_unavailable``; it never falls back to the built-in provider by itself.

An add-on that serves may also supply, as optional methods (each one's failure only leaves its part out):

* ``turn_context(*, user_id: int, message: str) -> dict`` with ``"skills"`` (its instructions to the model,
  in place of the built-in skills: one text, or named skills as ``{name: text}``, where the built-in skills'
  names ``memory`` and ``memory-check-own-files`` are reserved and such a skill is left out) and
  ``"notes"`` (its index files and what it recalls for this message, shown to the model as data, fenced,
  like the built-in index);
* ``tools() -> list[dict]`` (OpenAI function definitions of its memory tools, in place of the built-in ones;
  the built-in tools' names are reserved) and ``run_tool(*, user_id: int, name: str, arguments: dict) -> dict``.

* ``write(*, user_id: int, topic: str, summary: str, details: str | None, delete: bool) -> dict``: the host then
  offers its own ``propose_change`` tool and checks each write against the person's save level with the
  policy, as for the built-in notes: proposed in the inbox (the confirm calls ``write``), or refused. It is
  never handed over at once, not even under "Save it and tell me": every automatic note has an Undo and an
  entry in the audit of changes, and the host keeps no copy of an add-on's notes to give it either.

Whose notes (namespaces). A saved agent has its own choice of notes, and the host enforces it: the model does
not choose where a note goes. An add-on that keeps notes apart per namespace says so with ``namespaces =
True``; then the host passes, as one more keyword, the namespaces of the turn: ``namespaces`` (a list, the
narrowest first) to ``turn_context`` and ``run_tool`` (the notes that turn may read: show and search only
those), and ``namespace`` (one) to ``write`` (where the note goes). A namespace is ``user`` (the person's own
notes, read by every chat without an agent), ``agent:<id>`` (one saved agent's own) or ``channel:<key>``
(one messaging conversation's), as the built-in notes name their scopes. ``export`` and ``forget`` cover every
namespace of the person. An add-on without ``namespaces`` is called exactly as before (no new keyword): it
keeps one store for all the person's chats, so it serves only chats whose memory choice is the person's own
notes (no agent, or an agent whose memory is Mine); the chats of other agents get memory off, with the code
``memory_provider_one_store``, rather than read or save across agents.

* ``export(*, user_id: int) -> bytes`` (or ``(file name, bytes)``): Export then carries it as
  ``addons/<name>/<file>`` beside the notes (an import leaves that folder to the add-on);
* ``forget(*, user_id: int) -> None``: Forget everything then asks the add-on to forget too.
* ``forget_namespace(*, user_id: int, namespace: str) -> None`` (an add-on with ``namespaces`` only): drop the
  notes of one namespace. Deleting a saved agent with Delete asks each add-on that keeps namespaces to drop
  ``agent:<id>``, which no chat reads any more (``addons_forget_namespace``); one that is not running or fails
  is kept as a request to ask again (``memory.models.AddonForgetRequest``). Keep and Export then delete leave
  the add-on's (its export holds them, and Forget everything clears them).

Export and Forget everything go to every add-on the person picked at some time (``MemorySettings.addons_used``)
and still may hold their notes, whether it serves now or not: switching away from an add-on leaves its notes
in it. One that is not running (or no longer installed) is named in the answer, never counted as forgotten.

``memory`` names the old "Short memory" add-on, whose work the host now does itself: it is an alias of the
built-in provider. Picking it picks Built-in, a stored choice of it serves as Built-in, and an installed
add-on of that name is not listed a second time.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, cast

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "localai_memory.providers"
BUILTIN = "builtin"
OFF = "off"
#: The old memory add-on's name: an alias of the built-in provider, valid and harmless.
MEMORY_ALIAS = "memory"


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    label: str
    kind: str  # builtin, off, addon; missing: a picked add-on no longer installed (the Memory tab only)
    running: bool

    def as_dict(self) -> dict:
        return {"name": self.name, "label": self.label, "kind": self.kind, "running": self.running}


def _addons() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            if isinstance(obj, type):
                obj = obj()
        except Exception:  # an add-on that cannot even load is simply not running
            log.warning("memory provider add-on %s failed to load", ep.name, exc_info=True)
            continue
        name = str(getattr(obj, "name", ep.name))
        if "memory" in (getattr(obj, "provides", None) or ()) and name != MEMORY_ALIAS:
            found[name] = obj
    return found


def canonical(name: str) -> str:
    """The provider a choice means: the ``memory`` alias is the built-in provider."""
    return BUILTIN if name == MEMORY_ALIAS else name


def addon(name: str) -> Any | None:
    return _addons().get(name)


def addon_label(name: str) -> str:
    """How the memory add-on ``name`` is named to the person: its label, or its name once it is not installed."""
    obj = addon(name)
    return str(getattr(obj, "label", name)) if obj is not None else name


def addon_running(obj: Any) -> bool:
    try:
        return bool(obj.is_running())
    except Exception:
        log.warning("memory provider %s failed its running check", getattr(obj, "name", obj), exc_info=True)
        return False


def memory_providers() -> list[ProviderInfo]:
    """Every provider a person can pick for the memory slot."""
    result = [ProviderInfo(BUILTIN, "Built-in", "builtin", True), ProviderInfo(OFF, "Off", "off", True)]
    for name, obj in sorted(_addons().items()):
        result.append(ProviderInfo(name, str(getattr(obj, "label", name)), "addon", addon_running(obj)))
    return result


def provider_state(name: str) -> str:
    """builtin, addon, or addon_unavailable for a stored provider choice."""
    return provider_status(name)[0]


def provider_status(name: str) -> tuple[str, bool]:
    """``provider_state`` of a stored provider choice, and whether the add-on that serves keeps notes apart per
    namespace (``keeps_namespaces``; False for the built-in provider, which keeps its scopes itself)."""
    if canonical(name) == BUILTIN:
        return "builtin", False
    serving = _serving(name)
    return ("addon", keeps_namespaces(serving[1])) if serving is not None else ("addon_unavailable", False)


def keeps_namespaces(obj: Any) -> bool:
    """Whether an add-on keeps notes apart per namespace (``namespaces = True``): the host then passes the turn's
    namespaces to it. Anything but True (missing, failing, another value) is one store for every chat."""
    try:
        return getattr(obj, "namespaces", False) is True
    except Exception:
        log.warning("memory provider %s failed to say whether it keeps namespaces", getattr(obj, "name", obj),
                    exc_info=True)
        return False


# --- an add-on serving a turn -----------------------------------------------------------------------------

#: Tool names the built-in provider keeps for itself; an add-on's tool of such a name is not offered.
RESERVED_TOOLS = frozenset({"context_read", "memory_search", "propose_change", "revert_change"})
#: Skill names the built-in provider keeps for itself ("reserved for the built-in ones"); an add-on's skill of
#: such a name is left out.
RESERVED_SKILLS = frozenset({"memory", "memory-check-own-files"})
#: What an add-on may put in front of the model in one turn (the built-in indexes' per-turn cap).
ADDON_NOTES_MAX_BYTES = 6 * 1024
ADDON_SKILLS_MAX_BYTES = 2 * 1024
ADDON_TOOLS_MAX = 8
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")


@dataclass(frozen=True)
class AddonTurn:
    """What the serving add-on adds to one turn: its skills, its notes (data) and its tools."""

    name: str
    label: str
    skills: str = ""
    notes: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    provider: Any = None
    #: The add-on keeps notes apart per namespace (``keeps_namespaces``), and reads ``namespaces`` only.
    namespaces: bool = False
    #: The namespaces this turn may read, narrowest first (``user``, ``agent:<id>``, ``channel:<key>``).
    read_namespaces: tuple[str, ...] = ("user",)

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]

    @property
    def writes(self) -> bool:
        """Whether the add-on takes notes (``write``): then the host offers its ``propose_change``."""
        return callable(getattr(self.provider, "write", None))

    def run(self, *, user_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The add-on's answer to one of its tool calls (over the turn's namespaces, when it keeps them); an
        error result (never an exception) if it fails."""
        scoped = {"namespaces": list(self.read_namespaces)} if self.namespaces else {}
        try:
            result = self.provider.run_tool(user_id=user_id, name=name, arguments=arguments, **scoped)
        except Exception:
            log.warning("memory provider %s failed its tool %s", self.name, name, exc_info=True)
            return {"status": "error", "error": "provider_failed",
                    "message": f"The memory add-on {self.label} could not answer; try again later."}
        if not isinstance(result, Mapping):
            return {"status": "error", "error": "provider_failed",
                    "message": f"The memory add-on {self.label} gave no usable answer."}
        return dict(result)


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    data = value.encode("utf-8", "replace")
    return value if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def _skills(value: Any, name: str) -> str:
    """An add-on's skills as one text: a text as it is, or named skills (``{name: text}``) each under its
    name, without those whose names the built-in skills keep."""
    if not isinstance(value, Mapping):
        return _text(value, ADDON_SKILLS_MAX_BYTES)
    parts = []
    for skill, text in value.items():
        if not isinstance(skill, str) or not isinstance(text, str) or not text.strip():
            continue
        if skill.strip().lower() in RESERVED_SKILLS:
            log.warning("memory provider %s: its skill %r is left out; that name is the built-in skill's", name,
                        skill)
            continue
        parts.append(f"Skill {skill.strip()}:\n{text.strip()}")
    return _text("\n\n".join(parts), ADDON_SKILLS_MAX_BYTES)


def _tools(obj: Any, name: str) -> list[dict[str, Any]]:
    try:
        offered = obj.tools() if hasattr(obj, "tools") else []
    except Exception:
        log.warning("memory provider %s failed to list its tools", name, exc_info=True)
        return []
    tools: list[dict[str, Any]] = []
    for tool in offered if isinstance(offered, list) else []:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        tool_name = function.get("name") if isinstance(function, Mapping) else None
        if (not isinstance(tool_name, str) or not _TOOL_NAME.match(tool_name) or tool_name in RESERVED_TOOLS
                or tool_name in {t["function"]["name"] for t in tools}):
            log.warning("memory provider %s offers a tool that is not used: %r", name, tool_name)
            continue
        function = cast("Mapping[str, Any]", function)  # a name that is a str came from a Mapping
        tools.append({"type": "function", "function": {
            "name": tool_name, "description": _text(function.get("description"), 1024),
            "parameters": function.get("parameters") if isinstance(function.get("parameters"), Mapping)
            else {"type": "object", "properties": {}}}})
    return tools[:ADDON_TOOLS_MAX]


def _serving(choice: str, method: str | None = None) -> tuple[str, Any] | None:
    """``(name, add-on)`` when ``choice`` names an installed add-on that runs (and has ``method``), else None."""
    name = canonical(choice)
    obj = addon(name) if name not in (BUILTIN, OFF) else None
    if obj is None or not addon_running(obj) or (method is not None and not callable(getattr(obj, method, None))):
        return None
    return name, obj


def addon_tool_names(choice: str) -> tuple[list[str], bool]:
    """The serving add-on's own tool names and whether it takes notes, without asking for a turn's context
    (what ``GET /api/chats/{id}/tools`` lists); ``([], False)`` when ``choice`` names no running add-on."""
    serving = _serving(choice)
    if serving is None:
        return [], False
    name, obj = serving
    names = [t["function"]["name"] for t in _tools(obj, name)] if hasattr(obj, "run_tool") else []
    return names, callable(getattr(obj, "write", None))


def addon_turn(choice: str, *, user_id: int, message: str, namespaces: Sequence[str] = ("user",)
               ) -> AddonTurn | None:
    """The serving add-on's part of a turn, or None when ``choice`` names no running add-on. ``namespaces``
    are those the turn may read (the agent's choice), passed on to an add-on that keeps them apart."""
    serving = _serving(choice)
    if serving is None:
        return None
    name, obj = serving
    scoped = keeps_namespaces(obj)
    context: Any = {}
    if hasattr(obj, "turn_context"):
        try:
            context = obj.turn_context(user_id=user_id, message=message,
                                       **({"namespaces": list(namespaces)} if scoped else {}))
        except Exception:
            log.warning("memory provider %s failed to give its turn context", name, exc_info=True)
    if not isinstance(context, Mapping):
        context = {}
    return AddonTurn(name=name, label=str(getattr(obj, "label", name)),
                     skills=_skills(context.get("skills"), name),
                     notes=_text(context.get("notes"), ADDON_NOTES_MAX_BYTES),
                     tools=_tools(obj, name) if hasattr(obj, "run_tool") else [], provider=obj,
                     namespaces=scoped, read_namespaces=tuple(namespaces))


def addon_write(name: str, *, user_id: int, topic: str, summary: str, details: str | None, delete: bool,
                namespace: str = "user") -> None:
    """Hand a note the person confirmed to the add-on ``name``, for the
    namespace ``namespace`` (where the chat's memory choice sends it). Raises ``ServiceUnavailable`` (503) when
    it is not running, takes no notes or fails, and Conflict (409 ``memory_provider_one_store``) for a
    namespace other than ``user`` when it keeps one store: nothing was written, and a proposal stays waiting."""
    from localai_memory.core.errors import Conflict, ServiceUnavailable

    serving = _serving(name, "write")
    if serving is None:
        raise ServiceUnavailable(f"The memory add-on {name!r} is not running, so the note cannot be saved now; "
                                 "try again once it runs.", code="memory_provider_unavailable")
    scoped = keeps_namespaces(serving[1])
    if not scoped and namespace != "user":
        raise Conflict(f"The memory add-on {name!r} keeps one set of notes for all your chats, so it cannot keep "
                       f"this note apart for {namespace}; nothing was saved.", code="memory_provider_one_store")
    try:
        serving[1].write(user_id=user_id, topic=topic, summary=summary, details=details, delete=delete,
                         **({"namespace": namespace} if scoped else {}))
    except Exception:
        log.warning("memory provider %s failed to write a note", name, exc_info=True)
        raise ServiceUnavailable(f"The memory add-on {name!r} could not save the note; try again later.",
                                 code="memory_provider_failed") from None


#: Where an export carries what an add-on exported (``addons/<name>/<file>``).
ADDON_EXPORT_FOLDER = "addons"


def addons_export(names: Iterable[str], *, user_id: int) -> list[tuple[str, bytes]]:
    """The exports of the add-ons ``names`` (those the person used), each as ``(path in the zip, bytes)``; an
    add-on that supplies no export adds nothing. In place of one that fails, is not running or is not installed,
    a short text says so, so the person sees the export is incomplete."""
    files: list[tuple[str, bytes]] = []
    for name in sorted(set(names)):
        obj = addon(name)
        folder = f"{ADDON_EXPORT_FOLDER}/{name}"
        if obj is not None and not hasattr(obj, "export"):
            continue
        if obj is None or not addon_running(obj):
            why = "is not installed" if obj is None else "is not running"
            files.append((f"{folder}/EXPORT-FAILED.txt",
                          f"The memory add-on {name} {why}, so its notes are not in this export; export again "
                          "once it runs.\n".encode()))
            continue
        try:
            result = obj.export(user_id=user_id)
            file_name, data = result if isinstance(result, tuple) else (f"{name}-export", result)
            file_name = re.sub(r"[^A-Za-z0-9._-]", "_", str(file_name))[:100].lstrip(".") or f"{name}-export"
            if not isinstance(data, bytes | bytearray):
                raise TypeError("an export must be bytes")
            files.append((f"{folder}/{file_name}", bytes(data)))
        except Exception:
            log.warning("memory provider %s failed to export", name, exc_info=True)
            files.append((f"{folder}/EXPORT-FAILED.txt",
                          f"The memory add-on {name} could not export its notes; export again once it works.\n"
                          .encode()))
    return files


@dataclass(frozen=True)
class AddonForget:
    """What one add-on answered when asked to forget a person's notes."""

    name: str
    label: str
    #: forgot; failed (it raised); not_running; not_installed; no_forget (it offers no way to forget)
    status: str
    #: Which notes it was asked to forget, as the message names them.
    whose: str = "your notes"
    #: How to ask it again, when it could not be asked or failed (None: Forget everything's own words).
    again: str | None = None

    @property
    def message(self) -> str:
        whose = self.whose
        return {
            "forgot": f"The memory add-on {self.label} forgot {whose}.",
            "failed": f"The memory add-on {self.label} could not forget {whose}; "
                      f"{self.again or 'try again once it works'}.",
            "not_running": f"The memory add-on {self.label} is not running, so it was not asked to forget {whose} "
                           f"and may still hold them; {self.again or 'forget everything again once it runs'}.",
            "not_installed": f"The memory add-on {self.label} is no longer installed, so it was not asked to forget "
                             f"{whose}; if it kept them elsewhere, clear them there.",
            "no_forget": f"The memory add-on {self.label} offers no way to forget {whose}; clear them there.",
        }[self.status]

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "label": self.label, "status": self.status, "message": self.message}


def _asked_to_forget(name: str, obj: Any, method: str, **arguments: Any) -> str:
    """What one add-on answered to ``method(**arguments)`` (``AddonForget.status``)."""
    if obj is None:
        return "not_installed"
    if not callable(getattr(obj, method, None)):
        return "no_forget"
    if not addon_running(obj):
        return "not_running"
    try:
        getattr(obj, method)(**arguments)
    except Exception:
        log.warning("memory provider %s failed to %s %s", name, method, arguments, exc_info=True)
        return "failed"
    return "forgot"


def addons_forget(names: Iterable[str], *, user_id: int) -> list[AddonForget]:
    """Ask each add-on of ``names`` (those the person used) to forget the person's notes, whether it serves now
    or not, and say what each answered (``AddonForget``)."""
    answers: list[AddonForget] = []
    for name in sorted(set(names)):
        obj = addon(name)
        label = str(getattr(obj, "label", name)) if obj is not None else name
        answers.append(AddonForget(name, label, _asked_to_forget(name, obj, "forget", user_id=user_id)))
    return answers


def _may_hold_namespaces(obj: Any) -> bool:
    """An installed add-on that keeps namespaces, or one no longer installed (it may have kept them)."""
    return obj is None or keeps_namespaces(obj)


def namespaced_addons(names: Iterable[str]) -> list[str]:
    """The labels of those of ``names`` (the add-ons a person used) that may hold an agent's notes apart: each
    installed one that keeps namespaces, and one no longer installed (it may have)."""
    labels = []
    for name in sorted(set(names)):
        obj = addon(name)
        if _may_hold_namespaces(obj):
            labels.append(str(getattr(obj, "label", name)) if obj is not None else name)
    return labels


def addons_forget_namespace(names: Iterable[str], *, user_id: int, namespace: str, whose: str
                            ) -> list[AddonForget]:
    """Ask each add-on of ``names`` (those the person used) that keeps namespaces to drop ``namespace`` (a
    deleted agent's ``agent:<id>``), whether it serves now or not, and say what each answered, as
    ``addons_forget`` does. An installed add-on of one store is not asked: it never held a namespace apart (it
    serves no agent with notes of its own). One no longer installed may have, so it is named."""
    return [addon_forget_namespace(name, user_id=user_id, namespace=namespace, whose=whose)
            for name in sorted(set(names)) if _may_hold_namespaces(addon(name))]


#: How to ask an add-on again to drop a namespace (``memory.services.addon_forgets_record`` keeps the request).
FORGET_NAMESPACE_AGAIN = "it is listed on the Memory tab, to ask it again"


def addon_forget_namespace(name: str, *, user_id: int, namespace: str, whose: str) -> AddonForget:
    """Ask the add-on ``name`` to drop ``namespace`` of the person's notes, and say what it answered."""
    obj = addon(name)
    status = _asked_to_forget(name, obj, "forget_namespace", user_id=user_id, namespace=namespace)
    return AddonForget(name, addon_label(name), status, whose=whose, again=FORGET_NAMESPACE_AGAIN)


def forget_summary(answers: list[AddonForget]) -> str | None:
    """One word for all the add-ons' answers: None (none to ask), ``forgot`` (every one forgot) or ``failed``
    (at least one did not, or could not be asked)."""
    if not answers:
        return None
    return "forgot" if all(answer.status == "forgot" for answer in answers) else "failed"
