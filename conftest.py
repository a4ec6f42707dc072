"""Root conftest: registers the loopback fakes of outside parties as fixtures, and makes the tests load the
sample memory add-on (``tests/addons/sample_memory_provider``) of this checkout and turns it on.

The add-on is installed editable (``make``), which points at the checkout it was installed from: a second
checkout (a clone, a worktree) would test its own host against another checkout's add-on. Its folder goes
first on ``sys.path``, ahead of the installed mapping; the entry point still names it by module.
"""

import importlib.util
import os
import sys
from pathlib import Path

_SAMPLE_ADDON = Path(__file__).resolve().parent / "tests" / "addons" / "sample_memory_provider"
if _SAMPLE_ADDON.is_dir() and str(_SAMPLE_ADDON) not in sys.path:
    sys.path.insert(0, str(_SAMPLE_ADDON))
# The add-on offers itself only when this is set: ``make run`` serves from the same virtualenv, and a person
# must never be offered a test fixture, whose notes live in one process's memory, as a place to keep notes.
# Set here, before any test runs, so the servers the tests start as subprocesses see it too.
os.environ["SAMPLE_PROVIDER_ENABLED"] = "1"

pytest_plugins = ["tests.fakes.plugin"] if importlib.util.find_spec("tests.fakes.plugin") else []
