"""Child processes the tests start (gunicorn, a Celery worker): stopped the way a process manager stops them."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen, *, grace: float = 20) -> None:
    """SIGTERM, up to ``grace`` seconds to finish, then SIGKILL."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
