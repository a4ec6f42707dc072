"""Profile of one plain turn through ``POST /v1/chat/completions`` in this process (not part of the suite).

``.venv/bin/pytest bench/turn_profile/test_profile_turn.py -s -p no:cacheprovider`` (``VARY=1``: a new
message every turn; ``TURNS=n``) prints the SQL queries of
one plain turn, the CPU per turn over N turns, and (with pyinstrument installed) where the time goes. A user
with 40 notes (index of 40 lines, 40 topic files, their recall rows) talks to the loopback model (latency 0).
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from localai_memory.accounts.services import token_create
from localai_memory.chats import services
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import note_upsert
from tests.chats.helpers import model  # noqa: F401 - the fixture

TURNS = int(os.environ.get("TURNS", "60"))
#: VARY=1 sends a new text every turn (no remembered query vector), as a live chat does.
VARY = os.environ.get("VARY") == "1"
_turn = iter(range(10**9))


def body() -> dict:
    text = "What should I cook tonight? Keep it short."
    if VARY:
        text += f" Option {next(_turn)}."
    return {"model": "bench-model", "messages": [{"role": "user", "content": text}]}


@pytest.fixture
def setup(model):  # noqa: F811 - the loopback model wired into the settings (tests.chats.helpers)
    user = get_user_model().objects.create_user(username="prof", password="correct horse battery staple")
    for j in range(40):
        note_upsert(owner_id=user.pk, scope=Scope.user(), topic=f"t{j:02d}", summary=f"likes thing number {j:02d}",
                    details=f"Likes thing number {j:02d}. Noted from a chat: morning city family weekend.\n",
                    source="files", actor="you")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user)}")
    chat = services.chat_create(owner_id=user.pk, agent_id=None, origin="web", title="x")
    return client, chat


@pytest.mark.django_db(transaction=True)
def test_profile_one_plain_turn(setup):
    client, chat = setup
    headers = {"HTTP_X_CHAT_ID": str(chat.pk)}
    for _ in range(5):  # warm up: model loaded, connections made
        assert client.post("/v1/chat/completions", body(), format="json", **headers).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/v1/chat/completions", body(), format="json", **headers)
        assert response.status_code == 200, response.content
    print(f"\nqueries in one plain turn: {len(captured.captured_queries)}")
    shapes = Counter(q["sql"][:110] for q in captured.captured_queries)
    for sql, n in shapes.most_common():
        print(f"  {n:3d}  {sql}")
    cpu, wall = [], []
    for _ in range(TURNS):
        c0, w0 = time.process_time(), time.perf_counter()
        client.post("/v1/chat/completions", body(), format="json", **headers)
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    print(f"per turn over {TURNS}: cpu p50 {statistics.median(cpu):.1f} ms, wall p50 {statistics.median(wall):.1f} ms"
          f" p95 {sorted(wall)[int(len(wall) * .95)]:.1f} ms")
    try:
        from pyinstrument import Profiler
    except ImportError:
        return
    profiler = Profiler(interval=0.0005)
    profiler.start()
    for _ in range(TURNS):
        client.post("/v1/chat/completions", body(), format="json", **headers)
    profiler.stop()
    print(profiler.output_text(unicode=False, color=False, show_all=False))
