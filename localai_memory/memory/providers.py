"""Memory providers: Built-in, Off, and add-ons that declare they serve the ``memory`` slot.

An add-on is a Python package with an entry point in the group ``localai_memory.providers``. The entry point
loads an object (a class or an instance) with ``name``, ``label``, ``provides`` (a list of slots, e.g.
``["memory"]``) and ``is_running() -> bool``. When the chosen add-on is missing or not running, memory is off
with code ``memory_provider_unavailable``; it never falls back to the built-in provider by itself.

``memory`` names the old "Short memory" add-on, whose work the host now does itself: it is an alias of the
built-in provider. Picking it picks Built-in, a stored choice of it serves as Built-in, and an installed
add-on of that name is not listed a second time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

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
    kind: str  # builtin, off, addon
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
    if canonical(name) == BUILTIN:
        return "builtin"
    obj = addon(name)
    if obj is None or not addon_running(obj):
        return "addon_unavailable"
    return "addon"
