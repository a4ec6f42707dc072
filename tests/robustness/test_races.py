"""Races, with real threads against the real database: two people (or a hundred clicks) acting on the same
thing at the same moment save it once, and the ones who lost are told so (409), never silently ignored.

Each thread has its own database connection (Django opens one per thread) and closes it when done, so the
transactions really overlap; a barrier releases them together. The database of the test session serves the
whole suite, so at most ``parallel()`` threads hold a connection at the same moment (all of them still race
on the same row).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from bridges import core as bridges_core
from bridges import services as bridges_services
from bridges.models import Binding
from localai_memory.accounts.services import token_create
from localai_memory.core.errors import ApplicationError, Conflict
from localai_memory.core.invariants import check_invariants
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_confirm, proposal_create, proposal_reject
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.models import ChangeSet, FileVersion
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import file_write
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 60


def parallel(wanted: int) -> int:
    """How many threads may hold a connection at once: ``wanted``, or fewer when the server is busy."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity")
        free = cursor.fetchone()[0]
    return max(8, min(wanted, free - 20))


def at_once(calls: list[Callable[[], Any]], *, limit: int | None = None) -> list[tuple[str, Any]]:
    """Run every call in its own thread, released together; ("ok", result) or ("error", exception) each."""
    barrier = threading.Barrier(len(calls))
    gate = threading.BoundedSemaphore(limit or len(calls))
    results: list[tuple[str, Any]] = [("missing", None)] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait(TIMEOUT)
            with gate:
                try:
                    results[index] = ("ok", call())
                finally:
                    connections.close_all()
        except Exception as exc:  # noqa: BLE001 - the test looks at every outcome
            results[index] = ("error", exc)

    threads = [threading.Thread(target=run, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a racing thread did not finish"
    return results


def error_codes(results: list[tuple[str, Any]]) -> Counter[str]:
    return Counter(value.code if isinstance(value, ApplicationError) else repr(value)
                   for kind, value in results if kind == "error")


@pytest.fixture
def waiting(owner) -> Proposal:
    return proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="Likes green tea")


def saved_for(proposal: Proposal) -> int:
    return ChangeSet.objects.filter(proposal_id=proposal.pk, source="proposal").count()


def test_a_hundred_confirms_of_one_proposal_save_it_once(owner, waiting):
    confirm = lambda: proposal_confirm(owner_id=owner.pk, proposal_id=waiting.pk, actor="you")

    results = at_once([confirm] * 100, limit=parallel(100))

    assert sum(1 for kind, _ in results if kind == "ok") == 1
    assert error_codes(results) == Counter({"proposal_decided": 99})
    assert saved_for(waiting) == 1
    assert notes_selectors.index_text(owner_id=owner.pk, scope=Scope.user()) == "- tea: Likes green tea\n"
    assert check_invariants() == []


def test_the_inbox_answers_409_to_every_click_but_the_first(owner, waiting):
    key = token_create(user=owner)

    def click() -> int:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        response = client.post(f"/api/chats/memory/proposals/{waiting.pk}/confirm")
        return response.status_code, response.json().get("error", {}).get("code")

    results = at_once([click] * 12)

    answers = Counter(value for kind, value in results if kind == "ok")
    assert answers == Counter({(200, None): 1, (409, "proposal_decided"): 11})
    assert saved_for(waiting) == 1


def test_a_confirm_and_a_reject_at_the_same_moment_decide_it_once(owner):
    for round_ in range(5):
        proposal = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic=f"t{round_}", summary="x y z")
        results = at_once([lambda pk=proposal.pk: proposal_confirm(owner_id=owner.pk, proposal_id=pk, actor="you"),
                           lambda pk=proposal.pk: proposal_reject(owner_id=owner.pk, proposal_id=pk, actor="you")])
        assert sum(1 for kind, _ in results if kind == "ok") == 1
        assert error_codes(results) == Counter({"proposal_decided": 1})
        proposal.refresh_from_db()
        assert saved_for(proposal) == (1 if proposal.status == "confirmed" else 0)
    assert check_invariants() == []


def test_edits_from_the_same_version_keep_one_and_tell_the_others_409(owner):
    file_write(owner_id=owner.pk, path="Memory/home.md", content="Rome\n", version=None)
    key = token_create(user=owner)

    def edit(text: str) -> Callable[[], tuple[int, str | None]]:
        def put() -> tuple[int, str | None]:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
            response = client.put("/api/files/content?path=Memory/home.md", {"content": text, "version": 1},
                                  format="json")
            return response.status_code, response.json().get("error", {}).get("code")
        return put

    texts = [f"Rome, edit {n}\n" for n in range(10)]
    results = at_once([edit(text) for text in texts])

    answers = Counter(value for kind, value in results if kind == "ok")
    assert answers == Counter({(200, None): 1, (409, "stale_version"): 9})
    current = notes_selectors.access_file(owner_id=owner.pk, path="Memory/home.md")
    assert current.version == 2 and current.content in texts
    assert FileVersion.objects.filter(owner=owner, path="Memory/home.md").count() == 2


def test_concurrent_edits_of_one_file_never_lose_an_edit(owner):
    """Eight writers each add five lines, reloading after every 409: all forty lines are there."""
    file_write(owner_id=owner.pk, path="Memory/log.md", content="", version=None)
    conflicts = Counter()

    def writer(number: int) -> Callable[[], int]:
        def run() -> int:
            for line in range(5):
                for _attempt in range(200):
                    note = notes_selectors.access_file(owner_id=owner.pk, path="Memory/log.md")
                    try:
                        file_write(owner_id=owner.pk, path="Memory/log.md",
                                   content=note.content + f"writer {number} line {line}\n", version=note.version)
                        break
                    except Conflict as exc:
                        conflicts[exc.code] += 1
                else:
                    raise AssertionError("a writer never got its turn")
            return number
        return run

    results = at_once([writer(n) for n in range(8)])

    assert [kind for kind, _ in results] == ["ok"] * 8
    final = notes_selectors.access_file(owner_id=owner.pk, path="Memory/log.md")
    lines = final.content.splitlines()
    assert sorted(lines) == sorted(f"writer {n} line {k}" for n in range(8) for k in range(5))
    assert final.version == 41
    assert set(conflicts) <= {"stale_version"}
    assert check_invariants() == []


def test_a_yes_in_the_chat_and_a_click_in_the_inbox_at_the_same_moment_save_once(owner, model, settings):
    settings.TELEGRAM_API_BASE_URL = "http://127.0.0.1:9"  # never called: the core does not send
    binding = bridges_services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot",
                                              mode="webhook", credentials={"token": "123456:RACE-TOKEN"})
    sender = bridges_services.sender_seen(binding_id=binding.pk, external_id="5550001", display="Alice")
    offer = bridges_services.pairing_offer(sender=sender)
    bridges_services.pairing_approve(binding=Binding.objects.get(pk=binding.pk), code=offer.code, can_confirm=True)
    key = token_create(user=owner)

    def message(text: str) -> bridges_core.InboundMessage:
        return bridges_core.InboundMessage(binding_id=binding.pk, conversation_id="5550001", kind="one_to_one",
                                           sender_id="5550001", sender_display="Alice", text=text)

    answers: Counter[str] = Counter()
    for round_ in range(3):
        model.script(tool_calls(("propose_change", {"kind": "memory", "topic": f"drink{round_}",
                                                    "summary": f"Likes drink number {round_}"})), reply("Noted."))
        asked = bridges_core.handle(message(f"Remember drink {round_}."))
        assert any(button.answer == "yes" for outbound in asked.messages for button in outbound.buttons)
        proposal = Proposal.objects.get(owner=owner, topic=f"drink{round_}")

        def yes_in_chat() -> str:
            return "\n".join(outbound.text for outbound in bridges_core.handle(message("yes")).messages)

        def click_in_inbox(pk: int = proposal.pk) -> int:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
            return client.post(f"/api/chats/memory/proposals/{pk}/confirm").status_code

        (chat_kind, chat_text), (inbox_kind, inbox_status) = at_once([yes_in_chat, click_in_inbox])

        assert chat_kind == "ok" and inbox_kind == "ok", (chat_text, inbox_status)
        chat_won = chat_text.startswith("Saved")
        assert chat_won != (inbox_status == 200), (chat_text, inbox_status)
        if chat_won:
            assert inbox_status == 409
        else:  # the chat read the question as open and lost the race, or found it answered and passed the yes on
            assert "already answered" in chat_text or chat_text == "OK", chat_text  # "OK": the model's answer
        answers["chat" if chat_won else "inbox"] += 1
        assert saved_for(proposal) == 1
    assert sum(answers.values()) == 3
    assert check_invariants() == []


def test_a_confirm_and_the_model_proposing_the_same_note_again_never_deadlock(owner):
    for round_ in range(10):
        proposal = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic=f"x{round_}", summary="a b")
        results = at_once([
            lambda pk=proposal.pk: proposal_confirm(owner_id=owner.pk, proposal_id=pk, actor="you"),
            lambda r=round_: proposal_create(owner_id=owner.pk, scope=Scope.user(), topic=f"x{r}", summary="a b"),
        ])
        assert all(kind == "ok" or isinstance(value, ApplicationError) for kind, value in results), results
        assert saved_for(proposal) == 1
    assert check_invariants() == []
