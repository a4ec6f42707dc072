"""How a turn stores what was said: the message and the reply together once the model answered, the message
with the time it arrived; the message alone when the model failed; and the consolidation pass queued only
after the person has their answer."""

from __future__ import annotations

import datetime as dt
import threading
import time

import psycopg
import pytest
import time_machine
from django.core.cache import cache
from django.db import connection
from django.http import HttpResponse
from django.test import RequestFactory

from localai_memory.chats import services
from localai_memory.chats.models import Message
from localai_memory.chats.selectors import TurnRead
from localai_memory.core import after_response as after_response_module
from localai_memory.core.after_response import AfterResponseMiddleware, after_response
from localai_memory.growth.consolidation import _AFTER_TURN_KEY
from tests.chats.helpers import new_chat, note, send, system_of

pytestmark = pytest.mark.django_db

ARRIVED = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


def test_the_message_keeps_the_time_it_arrived_and_comes_before_the_reply(api, model):
    chat = new_chat(api)
    with time_machine.travel(ARRIVED, tick=False) as traveller:

        def slow_model(_request):
            traveller.shift(dt.timedelta(seconds=40))  # the model thinks for 40 seconds
            return "Done thinking."

        model.script(slow_model)
        send(api, chat, "Think about it.")
    message, reply = Message.objects.filter(chat_id=chat).order_by("id")
    assert (message.role, message.content, message.created_at) == ("user", "Think about it.", ARRIVED)
    assert (reply.role, reply.content) == ("assistant", "Done thinking.")
    assert reply.created_at == ARRIVED + dt.timedelta(seconds=40)
    listed = api.get(f"/api/chats/{chat}").json()["messages"]
    assert [m["content"] for m in listed] == ["Think about it.", "Done thinking."]


def test_a_model_that_fails_leaves_the_message_alone_and_no_reply(api, model):
    chat = new_chat(api)
    model.fail_next(500)
    response = api.post(f"/api/chats/{chat}/messages", {"content": "Hello?"}, format="json")
    assert response.status_code == 502
    kept = response.json()["error"]["details"]["user_message_id"]
    assert list(Message.objects.filter(chat_id=chat).values_list("id", "role")) == [(kept, "user")]


def test_a_reply_with_a_nul_character_is_stored_without_it_next_to_the_message(api, model):
    chat = new_chat(api)
    model.script("Sure\x00thing.")
    assert send(api, chat, "Can you?")["reply"] == "Surething."
    assert [(m.role, m.content) for m in Message.objects.filter(chat_id=chat).order_by("id")] == [
        ("user", "Can you?"), ("assistant", "Surething.")]


def test_a_reply_the_model_garbled_is_a_502_and_the_message_is_kept(api, model):
    chat = new_chat(api)
    model.script({"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": [{"type": "text", "text": 5}]}}]})
    response = api.post(f"/api/chats/{chat}/messages", {"content": "Hello?"}, format="json")
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_bad_response"
    assert list(Message.objects.filter(chat_id=chat).values_list("role", "content")) == [("user", "Hello?")]


def test_a_turn_over_http_queues_the_consolidation_pass_once_the_answer_is_sent(api, owner, model):
    cache.delete(_AFTER_TURN_KEY.format(user_id=owner.pk))
    send(api, new_chat(api), "I moved to Lisbon.")
    assert cache.get(_AFTER_TURN_KEY.format(user_id=owner.pk)) == "1"


def test_work_after_the_response_waits_for_the_response_to_be_closed():
    ran: list[str] = []

    def view(_request):
        after_response(lambda: ran.append("after"))
        ran.append("view")
        return HttpResponse("answer")

    response = AfterResponseMiddleware(view)(RequestFactory().get("/"))
    assert ran == ["view"]  # the answer is ready, the bookkeeping has not run
    response.close()  # what the WSGI server does once it has sent the answer
    assert ran == ["view", "after"]


def test_work_after_the_response_that_fails_is_logged_and_the_rest_still_runs(caplog):
    ran: list[str] = []

    def view(_request):
        after_response(lambda: 1 / 0)
        after_response(lambda: ran.append("second"))
        return HttpResponse("answer")

    AfterResponseMiddleware(view)(RequestFactory().get("/")).close()
    assert ran == ["second"]
    assert "after-response work" in caplog.text


def test_outside_a_request_the_work_runs_at_once():
    ran: list[str] = []
    after_response(lambda: ran.append("now"))
    assert ran == ["now"]


@pytest.fixture
def served():
    """The process as a WSGI server runs it: answered requests' work goes to the after-response thread."""
    from django.db import connections

    after_response_module.run_in_background()
    background = after_response_module._background
    yield background
    background.submit([connections.close_all])  # the thread's own database connection, before the test's ends
    assert after_response_module.drain(10)
    after_response_module._background = None


def _answered(*work) -> HttpResponse:
    def view(_request):
        for fn in work:
            after_response(fn)
        return HttpResponse("answer")

    response = AfterResponseMiddleware(view)(RequestFactory().get("/"))
    response.close()
    return response


def test_served_the_work_runs_in_order_on_a_thread_of_its_own_after_the_response(served):
    ran: list[tuple[str, str]] = []
    gate = threading.Event()
    _answered(gate.wait, lambda: ran.append(("first", threading.current_thread().name)))
    _answered(lambda: 1 / 0, lambda: ran.append(("second", threading.current_thread().name)))
    assert ran == []  # closed: the request's thread is free, the work has not run yet
    gate.set()
    assert after_response_module.drain(10)
    assert ran == [("first", "after-response"), ("second", "after-response")]


def test_served_a_full_queue_makes_the_request_run_its_own_work(served):
    busy, gate = threading.Event(), threading.Event()
    _answered(busy.set, gate.wait)  # the thread is busy with this one ...
    assert busy.wait(10)
    for _ in range(served.MAX_WAITING):
        _answered(lambda: None)  # ... and these fill its queue
    ran: list[str] = []
    _answered(lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]  # nothing is dropped: it ran in the request's thread
    gate.set()


def _backend_into(backends: list[int]):  # type: ignore[no-untyped-def]
    """Work that notes which PostgreSQL backend (connection) the thread it runs on uses."""
    from django.db import connection

    def backend() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backends.append(cursor.fetchone()[0])

    return backend


@pytest.mark.django_db(transaction=True)
def test_served_the_thread_keeps_its_connection_while_work_comes_and_gives_it_back_when_idle(served):
    """With ``CONN_MAX_AGE=0`` (the default) a connection per batch would cost a connect each time."""
    from django.db import connection

    backends: list[int] = []
    backend = _backend_into(backends)

    _answered(backend)
    assert after_response_module.drain(10)
    _answered(backend)
    assert after_response_module.drain(10)
    assert backends[0] == backends[1]

    served.IDLE_SECONDS = 0.05  # read by the next wait for work

    def still_connected() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [backends[0]])
            return cursor.fetchone()[0] == 1

    _answered(lambda: None)  # the wait after this one is short
    assert after_response_module.drain(10)
    deadline = time.monotonic() + 10
    while still_connected():  # a bounded wait on a condition: the idle thread closes its connection
        assert time.monotonic() < deadline, "the idle thread kept its database connection"
        threading.Event().wait(0.02)


@pytest.mark.django_db(transaction=True)
def test_served_a_kept_connection_the_server_ended_is_replaced_before_the_next_batch(served):
    from django.db import connection

    served.IDLE_SECONDS = 60  # the thread keeps its connection between the two batches
    backends: list[int] = []
    backend = _backend_into(backends)

    _answered(backend)
    assert after_response_module.drain(10)
    with connection.cursor() as cursor:  # a restart of the server, as far as that connection can tell
        cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [backends[0]])
    _answered(backend)
    assert after_response_module.drain(10)
    assert len(backends) == 2 and backends[1] != backends[0]  # the second batch ran, on a new connection


@pytest.mark.django_db(transaction=True)
def test_served_an_openai_turn_stores_its_chat_log_from_the_thread(served, owner, client_for, model):
    from tests.chats.test_chats_api import bearer

    model.script(reply_text := "Stored later.")
    response = bearer(client_for, owner).post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "keep this"}]}, format="json")
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == reply_text
    assert after_response_module.drain(10)
    chat_id = int(response["X-Chat-Id"])
    assert list(Message.objects.filter(chat_id=chat_id).order_by("id").values_list("role", "content")) == [
        ("user", "keep this"), ("assistant", reply_text)]


def test_a_read_another_app_adds_to_the_turn_that_fails_leaves_the_turn_answering(api, owner, model, monkeypatch):
    note(owner, "home", "lives in Rome")
    broken = TurnRead(sql="SELECT 1 / 0", params=[], parse=lambda rows: rows)
    monkeypatch.setitem(services.turn_read_hooks, "broken", lambda owner_id, scopes: broken)
    chat = new_chat(api)
    body = send(api, chat, "Where do I live?")
    assert "lives in Rome" in system_of(model.last_request)  # the index, and recall reading for itself
    assert body["memory"]["recall"]["count"] >= 1


def test_asking_again_answers_the_kept_message_once(owner, model):
    """After the model failed, the kept message is asked again without a copy; only the chat's last, still
    unanswered message can be, and one retry at a time."""
    from localai_memory.chats.services import chat_create, turn_retry, turn_run
    from localai_memory.core.errors import Conflict, InvalidInput, UpstreamError
    from tests.fakes.openai_server import reply

    chat = chat_create(owner_id=owner.pk)
    model.fail_next(500)
    with pytest.raises(UpstreamError):
        turn_run(chat=chat, content="Hello?")
    (kept,) = Message.objects.filter(chat=chat)
    # another tab (another worker, its own database session) is asking again right now
    other = psycopg.connect(**{k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"},
                            autocommit=True)
    other.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [0x4C52, str(kept.pk)])
    with pytest.raises(Conflict):
        turn_retry(chat=chat, message_id=kept.pk)
    with connection.cursor() as cursor:  # that worker is killed in the middle of it: its claim goes with it
        cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [other.info.backend_pid])  # waits for the end
    other.close()
    model.script(reply("Hi."))
    turn_retry(chat=chat, message_id=kept.pk)
    assert list(Message.objects.filter(chat=chat).order_by("id").values_list("role", "content")) == [
        ("user", "Hello?"), ("assistant", "Hi.")]
    assert model.last_request["messages"][1:] == [{"role": "user", "content": "Hello?"}]  # once
    with pytest.raises(InvalidInput):  # answered now
        turn_retry(chat=chat, message_id=kept.pk)


@pytest.mark.django_db(transaction=True)
def test_two_turns_sent_to_one_chat_at_the_same_moment_each_keep_their_reply_right_after_their_message(
        owner, client_for, model, settings):
    settings.LLM_TIMEOUT = 30.0  # the first turn's model waits for the whole second turn
    api = client_for(owner)
    chat = new_chat(api)
    second_answered = threading.Event()

    def slow_first(_request):
        model.think_until(second_answered)  # the first turn's model is still thinking when the second answers
        return "About the first."

    model.script(slow_first, "About the second.")
    first: dict = {}
    sent_first = threading.Thread(target=lambda: first.update(send(client_for(owner), chat, "First question.")))
    sent_first.start()
    model.wait_for_requests(1)

    second = send(api, chat, "Second question.")
    second_answered.set()
    sent_first.join(timeout=30)

    assert (first["reply"], second["reply"]) == ("About the first.", "About the second.")
    # Each turn is one exchange, in the order the turns ended: the page, the API and the model's history
    # never show a reply under the other turn's message.
    turns = ["Second question.", "About the second.", "First question.", "About the first."]
    assert [m["content"] for m in api.get(f"/api/chats/{chat}").json()["messages"]] == turns
    model.script("Noted.")
    send(api, chat, "And now?")
    assert [m["content"] for m in model.last_messages[1:]] == [*turns, "And now?"]
