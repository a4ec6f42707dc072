"""The recall blend and the fading of the model's notes come from the server's settings
(``LOCALAI_MEMORY_RECALL_WEIGHTS``, ``LOCALAI_MEMORY_RECALL_DECAY_DAYS``); a value that makes no sense stops
the server at start with a message that says what to write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from localai_memory.recall.ranking import DEFAULT_CONFIG, Candidate, DegradeReason, rank_notes
from localai_memory.recall.service import configured

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def candidates() -> list[Candidate]:
    return [Candidate(id="by-model", text="espresso: drinks espresso espresso every morning", source="model",
                      importance=0.4, updated_at=NOW - timedelta(days=1)),
            Candidate(id="by-you", text="coffee: likes espresso", source="user", importance=0.8,
                      updated_at=NOW - timedelta(days=400))]


def test_the_measured_blend_is_the_default_and_a_configured_one_reorders_the_notes(settings):
    assert configured() is DEFAULT_CONFIG
    query = "which espresso drinks"
    default = rank_notes(candidates(), query=query, now=NOW, degrade_reason=DegradeReason.NO_EMBEDDER,
                         config=configured())
    settings.RECALL_WEIGHTS = (0.0, 0.0, 1.0)  # importance only: what you wrote yourself first
    settings.RECALL_DECAY_DAYS = 7.0
    mine_first = configured()
    assert (mine_first.weights.importance, mine_first.decay_days) == (1.0, 7.0)
    reordered = rank_notes(candidates(), query=query, now=NOW, degrade_reason=DegradeReason.NO_EMBEDDER,
                           config=mine_first)
    assert default.ids[0] == "by-model" and reordered.ids[0] == "by-you"


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("LOCALAI_MEMORY_RECALL_WEIGHTS", "0.5,0.5", "three numbers of at least 0"),
    ("LOCALAI_MEMORY_RECALL_WEIGHTS", "0,0,0", "three numbers of at least 0"),
    ("LOCALAI_MEMORY_RECALL_WEIGHTS", "a,b,c", "three numbers of at least 0"),
    ("LOCALAI_MEMORY_RECALL_WEIGHTS", "nan,1,1", "three numbers of at least 0"),
    ("LOCALAI_MEMORY_RECALL_WEIGHTS", "inf,0,0", "three numbers of at least 0"),
    ("LOCALAI_MEMORY_RECALL_DECAY_DAYS", "0", "more than 0 days"),
    ("LOCALAI_MEMORY_RECALL_DECAY_DAYS", "nan", "'nan' is not a finite number"),
    ("LLM_TIMEOUT", "-5", "LLM_TIMEOUT must be more than 0 seconds"),
    ("LLM_TIMEOUT", "inf", "'inf' is not a finite number"),
    ("LOCALAI_MEMORY_CONSOLIDATION_SCHEDULE", "60", "at least 300 seconds"),
    ("LOCALAI_MEMORY_RECALL_CATCH_UP_SCHEDULE", "5", "at least 30"),
    ("LOCALAI_MEMORY_RECALL_MAX_NOTES", "0", "from 1 to 20"),
    ("LOCALAI_MEMORY_RECALL_MAX_BYTES", "100000", "from 256 to 16384"),
])
def test_a_setting_that_makes_no_sense_stops_the_start_with_what_to_write(variable, value, message):
    env = {**os.environ, variable: value, "DATABASE_URL": "postgresql://x@localhost/x",
           "REDIS_URL": "redis://localhost:6379/0", "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30, "DJANGO_SETTINGS_MODULE": "localai_memory.settings"}
    out = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode != 0 and "ImproperlyConfigured" in out.stderr and message in out.stderr


def test_the_background_schedules_come_from_the_settings():
    env = {**os.environ, "LOCALAI_MEMORY_CONSOLIDATION_SCHEDULE": "3600", "LOCALAI_MEMORY_RECALL_CATCH_UP_SCHEDULE": "60",
           "DATABASE_URL": "postgresql://x@localhost/x", "REDIS_URL": "redis://localhost:6379/0", "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30,
           "DJANGO_SETTINGS_MODULE": "localai_memory.settings"}
    code = ("import django, json; django.setup(); from django.conf import settings; "
            "print(json.dumps({name: entry['schedule'] for name, entry in settings.CELERY_BEAT_SCHEDULE.items()}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    schedules = json.loads(out.stdout)
    assert schedules["memory-consolidate-due"] == 3600.0 and schedules["recall-catch-up"] == 60.0


def test_a_manage_py_command_stopped_by_a_setting_prints_only_what_to_write():
    env = {**os.environ, "LOCALAI_MEMORY_RECALL_DECAY_DAYS": "0", "DATABASE_URL": "postgresql://x@localhost/x",
           "REDIS_URL": "redis://localhost:6379/0", "SECRET_KEY": "throwaway-key-of-a-test-" + "k" * 30}
    out = subprocess.run([sys.executable, "manage.py", "check"], cwd=Path(__file__).resolve().parents[2], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert out.stderr == "ImproperlyConfigured: LOCALAI_MEMORY_RECALL_DECAY_DAYS must be more than 0 days\n"
