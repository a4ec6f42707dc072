"""Where one plain turn's time goes, stage by stage, in this process (not part of the suite).

``VARY=1 LAT=50 .venv/bin/pytest bench/turn_profile/test_stage_times.py -s -p no:cacheprovider -q`` (``TURNS=n``,
``LAT``: the loopback model's latency in ms; 50 makes every stage after the model call start on a core that
sat idle, as in a live turn; ``KIND=propose``: every turn the model proposes a new note, as the load bench's
proposing turns do, and the user saves at once; ``WHO=<stage>``, a label as printed, e.g.
``WHO=index.embed_texts``: print where each call of that stage comes from; ``EXTRA=module:function,…``:
time more functions, by the module the caller looks them up in). Each stage function is wrapped in a timer
for the run (the functions themselves are unchanged), and the median per turn is printed with the whole
request's.
"""

from __future__ import annotations

import functools
import importlib
import os
import statistics
import time
from collections import defaultdict

import pytest

from bench.turn_profile.test_profile_turn import body, setup  # noqa: F401 - the fixture
from tests.chats.helpers import model  # noqa: F401 - the fixture

TURNS = int(os.environ.get("TURNS", "200"))
STAGES = [
    ("localai_memory.accounts.authentication", "user_for_key"),
    ("localai_memory.chats.selectors", "access_chat"),
    ("localai_memory.chats.services", "read_turn_memory"),
    ("localai_memory.chats.services", "turn_facts"),
    ("localai_memory.chats.services", "_recall"),
    ("localai_memory.recall.index", "embed_query_texts"),
    ("localai_memory.recall.service", "rank_notes"),
    ("localai_memory.chats.llm", "chat_completion"),
    ("localai_memory.chats.services", "messages_add"),
    ("localai_memory.growth.consolidation", "consolidation_schedule_after_turn"),
    ("localai_memory.chats.services", "turn_run"),
]
#: KIND=propose: the model proposes a note in every turn (the load bench's model server decides the reply)
PROPOSE = os.environ.get("KIND") == "propose"
PROPOSE_STAGES = [
    ("localai_memory.chats.services", "run_tool"),
    ("localai_memory.chats.tools", "note_upsert"),
    ("localai_memory.chats.tools", "_drops_lines"),
    ("localai_memory.recall.service", "find_duplicate"),
    ("localai_memory.recall.index", "scope_passages"),
    ("localai_memory.chats.tools", "proposal_create"),
    ("localai_memory.notes.services", "apply_changes"),
    ("localai_memory.recall.index", "embed_texts"),
    ("localai_memory.recall.index", "embed_written"),
    ("localai_memory.recall.index", "scopes_sync"),
]


@pytest.mark.django_db(transaction=True)
def test_stage_times(setup, monkeypatch, model):  # noqa: F811
    client, chat = setup
    model.latency_ms = int(os.environ.get("LAT", "0"))
    stages = STAGES
    if PROPOSE:
        from bench.load.model_server import decide
        from localai_memory.memory.services import settings_update

        model.default_reply = decide
        settings_update(user_id=chat.owner_id, save_mode=os.environ.get("SAVE_MODE", "auto"))
        stages = STAGES + PROPOSE_STAGES
    # EXTRA=module:function,...: more stages to time (e.g. EXTRA=localai_memory.chats.tools:next_id)
    stages = stages + [(item.partition(":")[0], item.partition(":")[2])
                       for item in os.environ.get("EXTRA", "").split(",") if item]
    spent: dict[str, list[float]] = defaultdict(list)
    for module_name, name in stages:
        module = importlib.import_module(module_name)
        original = getattr(module, name)
        label = f"{module_name.rsplit('.', 1)[-1]}.{name}"

        def timed(*args, _original=original, _key=label, **kwargs):
            started = time.perf_counter()
            if os.environ.get("WHO") == _key:
                import traceback
                print("".join(traceback.format_stack(limit=9)[:-1]))
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_key].append((time.perf_counter() - started) * 1000)

        monkeypatch.setattr(module, name, functools.wraps(original)(timed))
    headers = {"HTTP_X_CHAT_ID": str(chat.pk)}
    for _ in range(10):  # warm up: model loaded, connections made
        client.post("/v1/chat/completions", turn_body(), format="json", **headers)
    spent.clear()
    whole = []
    for _ in range(TURNS):
        started = time.perf_counter()
        response = client.post("/v1/chat/completions", turn_body(), format="json", **headers)
        whole.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    print(f"\n{'stage':50s} {'calls/turn':>10s} {'median ms':>10s} {'p95 ms':>8s} {'p99 ms':>8s}")
    for key, values in [*spent.items(), ("the whole request (test client)", whole)]:
        cuts = statistics.quantiles(values, n=100) if len(values) > 1 else values * 99
        print(f"{key:50s} {len(values) / TURNS:10.1f} {statistics.median(values):10.2f} {cuts[94]:8.2f} "
              f"{cuts[98]:8.2f}")


_notes = iter(range(10**9))


def turn_body() -> dict:
    if not PROPOSE:
        return body()
    number = next(_notes)
    # One of the seeded topics (the index is at its 40-line cap, so a new topic would be refused), with a
    # line that says more than the seeded one: an update saved at once, as the load bench's proposing turns
    # (a shorter line than theirs: this seed's lines are longer, and the index stays within its 2 KiB).
    text = f"Please remember this. [[propose:t{number % 40:02d}:Note {number % 1000:03d} about garden and tea]]"
    return {"model": "bench-model", "messages": [{"role": "user", "content": text}]}
