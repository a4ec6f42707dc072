"""The WSGI entry point gunicorn loads: what it sets up before the first request."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_web_app_hides_what_it_loaded_at_start_from_the_garbage_collector():
    """A full collection over Django's ~190,000 start-up objects would stop a worker for ~95 ms mid-turn."""
    script = ("import gc, os; os.environ['LOCALAI_MEMORY_DEV'] = '1'; "
              "from localai_memory.wsgi import application; print(gc.get_freeze_count())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "localai_memory.settings"})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) > 50_000
