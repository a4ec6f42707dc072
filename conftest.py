"""Root conftest: registers the loopback fakes of outside parties as fixtures."""

import importlib.util

pytest_plugins = ["tests.fakes.plugin"] if importlib.util.find_spec("tests.fakes.plugin") else []
