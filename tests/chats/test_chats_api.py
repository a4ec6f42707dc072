"""The chats API: create, list, read, the private switch, the tools report, failures of the model server,
the OpenAI-compatible route, and a second user who gets a 404 on everything of the first."""

from __future__ import annotations

import json

import pytest

from localai_memory.agents.models import Agent
from localai_memory.chats.models import Message
from tests.chats.helpers import index_of, make_agent, new_chat, note, send, set_memory, system_of
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db


def test_a_chat_is_created_listed_and_read_with_its_messages(api, owner, model):
    agent = make_agent(owner)
    chat = new_chat(api, agent=agent.pk, title="Dinner")
    model.script(reply("Pasta."))
    send(api, chat, "What for dinner?")
    assert [c["id"] for c in api.get("/api/chats").json()["chats"]] == [chat]
    body = api.get(f"/api/chats/{chat}").json()
    assert body["title"] == "Dinner" and body["agent"] == agent.pk and body["origin"] == "web"
    assert [(m["role"], m["content"]) for m in body["messages"]] == [("user", "What for dinner?"),
                                                                     ("assistant", "Pasta.")]
    assert body["messages"][1]["memory"]["on"] is True


def test_earlier_messages_are_sent_as_context(api, model):
    chat = new_chat(api)
    model.script(reply("Hello Ada."))
    send(api, chat, "I am Ada.")
    send(api, chat, "Who am I?")
    assert [(m["role"], m["content"]) for m in model.last_request["messages"][1:]] == [
        ("user", "I am Ada."), ("assistant", "Hello Ada."), ("user", "Who am I?")]


def test_bad_input_is_a_400_never_a_500(api, owner, model):
    chat = new_chat(api)
    assert api.post(f"/api/chats/{chat}/messages", {"content": ""}, format="json").status_code == 400
    assert api.post(f"/api/chats/{chat}/messages", {"content": 5}, format="json").status_code == 400
    assert api.post(f"/api/chats/{chat}/messages", {"text": "hi"}, format="json").status_code == 400
    assert api.put(f"/api/chats/{chat}/builtins", {"memory": "no"}, format="json").status_code == 400
    assert api.post("/api/chats", {"agent": "x"}, format="json").status_code == 400
    assert api.post("/v1/chat/completions", {"messages": []}, format="json").status_code == 400
    assert api.post("/v1/chat/completions", {"messages": [{"role": "assistant", "content": "hi"}]},
                    format="json").json()["error"]["code"] == "invalid_messages"


def test_the_tools_report_names_the_tools_and_scopes_of_the_chat(api, owner, model):
    agent = make_agent(owner, memory="own")
    chat = new_chat(api, agent=agent.pk)
    body = api.get(f"/api/chats/{chat}/tools").json()
    assert body["memory"] == {"on": True, "code": None, "blocked_by": None, "fix": None, "served_by": "builtin"}
    assert body["tools"] == ["context_read", "propose_change", "revert_change"]
    assert body["scopes"] == {"read": ["agent"], "propose": ["agent"], "default": "agent"}


def test_turning_the_chat_memory_off_and_on_again(api, owner, model):
    note(owner, "home", "lives in Rome")
    chat = new_chat(api)
    off = api.put(f"/api/chats/{chat}/builtins", {"memory": False}, format="json").json()
    assert off["private"] is True and off["memory"]["code"] == "private_chat"
    api.put(f"/api/chats/{chat}/builtins", {"memory": True}, format="json")
    send(api, chat)
    assert "lives in Rome" in system_of(model.last_request)


@pytest.mark.parametrize(("fault", "status", "code"), [
    (500, 502, "model_unavailable"),
    ("garbage", 502, "model_bad_response"),
    ("hang", 504, "model_unavailable"),
])
def test_a_failing_model_server_is_a_clear_error_and_the_message_is_kept(api, model, settings, fault, status, code):
    settings.LLM_TIMEOUT = 0.5
    chat = new_chat(api)
    model.fail_next(fault)
    response = api.post(f"/api/chats/{chat}/messages", {"content": "Are you there?"}, format="json")
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and "kept" in error["message"]
    assert error["details"]["user_message_id"]
    messages = api.get(f"/api/chats/{chat}").json()["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [("user", "Are you there?")]


@pytest.mark.parametrize(("status", "ours", "code"), [(400, 400, "model_refused"), (413, 400, "model_refused"),
                                                    (429, 429, "model_busy"), (503, 502, "model_unavailable")])
def test_what_the_model_server_refused_says_whether_trying_again_helps(api, model, status, ours, code):
    """A refused request (a context too long) is no 5xx a client would send again; a rate limit passes on
    its Retry-After; a failing server stays a 502."""
    from tests.fakes._loopback import Response

    model.script(Response(status=status, body=b'{"error": {"message": "context too long"}}',
                          headers={"Content-Type": "application/json", "Retry-After": "7"}))
    chat = new_chat(api)
    response = api.post(f"/api/chats/{chat}/messages", {"content": "Are you there?"}, format="json")
    assert response.status_code == ours
    error = response.json()["error"]
    assert error["code"] == code and "context too long" in error["message"] and error["details"]["user_message_id"]
    assert response.get("Retry-After") == ("7" if status == 429 else None)


def test_a_model_answer_nested_too_deep_to_parse_is_a_502_that_keeps_the_message(api, model):
    from tests.fakes._loopback import Response

    deep = b"[" * 5000 + b"]" * 5000
    model.script(Response(body=b'{"choices": [{"message": {"role": "assistant", "content": "hi"}}], "x": '
                          + deep + b"}", headers={"Content-Type": "application/json"}))
    chat = new_chat(api)
    response = api.post(f"/api/chats/{chat}/messages", {"content": "Are you there?"}, format="json")
    assert response.status_code == 502, response.content
    error = response.json()["error"]
    assert error["code"] == "model_bad_response" and error["details"]["user_message_id"]


def test_a_model_server_that_is_down_is_a_502(api, settings, openai_server):
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    chat = new_chat(api)
    response = api.post(f"/api/chats/{chat}/messages", {"content": "Hello?"}, format="json")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "model_unavailable"
    assert Message.objects.filter(chat_id=chat, role="user", content="Hello?").exists()


def test_a_note_saved_before_the_model_failed_is_reported_with_the_error(api, owner, model):
    set_memory(owner, save_mode="auto")
    chat = new_chat(api)
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})))
    model.fail_next(500, when=lambda request: len(model.requests) >= 1)
    response = api.post(f"/api/chats/{chat}/messages", {"content": "I am vegan."}, format="json")
    assert response.status_code == 502
    assert response.json()["error"]["details"]["memory"]["saved"][0]["topic"] == "diet"
    assert index_of(owner) == "- diet: vegan\n"


# --------------------------------------------------------------------------------------------------------
# POST /v1/chat/completions
# --------------------------------------------------------------------------------------------------------


def bearer(client_for, user):
    from rest_framework.test import APIClient

    from localai_memory.accounts.services import token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user)}")
    return client


def test_the_openai_route_runs_a_turn_with_memory_and_reports_it_in_a_header(owner, client_for, model):
    set_memory(owner, save_mode="auto")
    note(owner, "home", "lives in Rome")
    model.script(tool_calls(("context_read", {"topic": "home"}),
                            ("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("You live in Rome and eat vegan."))
    client = bearer(client_for, owner)
    response = client.post("/v1/chat/completions", {"model": "fake-model", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "I live in Rome."},
        {"role": "assistant", "content": "Nice."},
        {"role": "user", "content": [{"type": "text", "text": "I am vegan."}]},
    ]}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "You live in Rome and eat vegan."}
    header = json.loads(response["X-Memory"])
    assert header["on"] is True and header["read"] == 1 and header["topics"] == ["home"]
    assert header["saved"] == 1 and header["proposed"] == 0 and header["refused"] == 0
    sent = model.requests[0]["messages"]
    # one system message, the client's own prompt in place of the default (a chat template may refuse two)
    assert [m["role"] for m in sent].count("system") == 1
    assert sent[0]["content"].startswith("Be brief.\n\n") and "lives in Rome" in sent[0]["content"]
    assert "You are a helpful assistant." not in sent[0]["content"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "I live in Rome."), ("assistant", "Nice."), ("user", "I am vegan.")]
    assert index_of(owner) == "- home: lives in Rome\n- diet: vegan\n"


def test_the_openai_route_picks_the_agent_by_header_or_body(owner, client_for, model):
    agent = make_agent(owner, memory="none")
    client = bearer(client_for, owner)
    response = client.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
                           format="json", HTTP_X_AGENT_ID=str(agent.pk))
    assert json.loads(response["X-Memory"])["code"] == "agent_memory_none"
    response = client.post("/v1/chat/completions", {"agent": agent.pk, "messages": [
        {"role": "user", "content": "hi"}]}, format="json")
    assert json.loads(response["X-Memory"])["code"] == "agent_memory_none"
    assert "tools" not in model.last_request


def test_the_openai_route_streams_when_asked(owner, client_for, model):
    model.script(reply("Streamed."))
    response = bearer(client_for, owner).post("/v1/chat/completions", {
        "stream": True, "messages": [{"role": "user", "content": "hi"}]}, format="json")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/event-stream")
    text = b"".join(response.streaming_content).decode()
    assert '"content": "Streamed."' in text and text.endswith("data: [DONE]\n\n")
    assert "X-Memory" in response


def test_the_openai_route_answers_before_it_stores_the_chat_log(owner, client_for, model):
    """The client holds the conversation: the reply does not wait for the chat's log, which is stored (both
    messages, in order) once the response has been sent."""
    from localai_memory.chats.models import Message

    model.script(reply("First."), reply("Second."))
    client = bearer(client_for, owner)
    response = client.post("/v1/chat/completions", {
        "stream": True, "messages": [{"role": "user", "content": "hello there"}]}, format="json")
    chat_id = int(response["X-Chat-Id"])
    stream = iter(response.streaming_content)
    assert b"[DONE]" not in next(stream)  # the reply is on its way ...
    assert not Message.objects.filter(chat_id=chat_id).exists()  # ... and the log is not written yet
    assert b"".join(stream).endswith(b"data: [DONE]\n\n")
    assert list(Message.objects.filter(chat_id=chat_id).order_by("id").values_list("role", "content")) == [
        ("user", "hello there"), ("assistant", "First.")]
    response = client.post("/v1/chat/completions", {"messages": [
        {"role": "user", "content": "hello there"}, {"role": "assistant", "content": "First."},
        {"role": "user", "content": "and again"}]}, format="json", HTTP_X_CHAT_ID=str(chat_id))
    assert response.json()["id"].startswith(f"chatcmpl-{chat_id}-")
    assert list(Message.objects.filter(chat_id=chat_id).order_by("id").values_list("content", flat=True)) == [
        "hello there", "First.", "and again", "Second."]


def test_the_openai_route_needs_a_token(anon_api, model):
    response = anon_api.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
                             format="json")
    assert response.status_code == 401
    assert model.requests == []


# --------------------------------------------------------------------------------------------------------
# Another user
# --------------------------------------------------------------------------------------------------------


def test_a_second_user_gets_a_404_on_every_chat_of_the_first(api, outsider_api, outsider, owner, client_for, model):
    agent = make_agent(owner)
    chat = new_chat(api, agent=agent.pk)
    send(api, chat)
    calls = [
        outsider_api.get(f"/api/chats/{chat}"),
        outsider_api.post(f"/api/chats/{chat}/messages", {"content": "hi"}, format="json"),
        outsider_api.put(f"/api/chats/{chat}/builtins", {"memory": False}, format="json"),
        outsider_api.get(f"/api/chats/{chat}/builtins"),
        outsider_api.get(f"/api/chats/{chat}/tools"),
        outsider_api.delete(f"/api/chats/{chat}"),
        outsider_api.post("/api/chats", {"agent": agent.pk}, format="json"),
        bearer(client_for, outsider).post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]},
                                          format="json", HTTP_X_CHAT_ID=str(chat)),
        bearer(client_for, outsider).post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]},
                                          format="json", HTTP_X_AGENT_ID=str(agent.pk)),
    ]
    assert [c.status_code for c in calls] == [404] * len(calls)
    assert all(c.json()["error"]["code"] == "not_found" for c in calls)
    assert outsider_api.get("/api/chats").json()["chats"] == []
    assert len(model.requests) == 1
    assert api.get(f"/api/chats/{chat}/builtins").json()["private"] is False


def test_a_trigger_run_through_its_task_reads_but_saves_nothing(owner, model):
    from localai_memory.chats.services import chat_create
    from localai_memory.chats.tasks import run_turn
    from localai_memory.memory.models import Proposal

    set_memory(owner, save_mode="auto")
    note(owner, "home", "lives in Rome")
    chat = chat_create(owner_id=owner.pk, origin="trigger")
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "diet", "summary": "vegan"})),
                 reply("Daily summary."))
    assert run_turn(chat.pk, "Write the daily summary.")
    assert "lives in Rome" in system_of(model.requests[0])
    assert index_of(owner) == "- home: lives in Rome\n" and not Proposal.objects.exists()
    assert Message.objects.get(chat=chat, role="user").typed_by_user is False


def test_the_admin_lists_chats_messages_and_proposals_read_only(owner, client, django_user_model, model):
    from localai_memory.chats.services import chat_create, turn_run

    admin = django_user_model.objects.create_superuser("root", "root@example.com", "correct horse battery")
    chat = chat_create(owner_id=owner.pk, title="Dinner plans")
    turn_run(chat=chat, content="hello")
    client.force_login(admin)
    for url in ("/admin/chats/chat/", "/admin/chats/chat/?q=Dinner&origin__exact=web",
                f"/admin/chats/chat/{chat.pk}/change/", "/admin/chats/message/?role__exact=user",
                "/admin/memory/proposal/?status__exact=pending"):
        response = client.get(url)
        assert response.status_code == 200, url
    assert b"Dinner plans" in client.get("/admin/chats/chat/?q=Dinner").content
    assert client.get("/admin/chats/chat/add/").status_code == 403


def _server_timing(response) -> dict[str, float]:
    parts = (item.strip().split(";dur=") for item in response["Server-Timing"].split(","))
    return {name: float(value) for name, value in parts}


def test_a_turn_says_how_long_the_model_and_the_app_took(owner, client_for, model):
    note(owner, "home", "lives in Rome")
    model.latency_ms = 40
    response = bearer(client_for, owner).post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Where do I live?"}]}, format="json")
    assert response.status_code == 200, response.content
    timing = _server_timing(response)
    assert set(timing) == {"model", "recall", "app"}
    assert timing["model"] >= 40
    assert timing["app"] >= timing["model"] + timing["recall"]


def test_the_chat_route_reports_its_timing_too(owner, client_for, model):
    chat = client_for(owner).post("/api/chats", {"title": "t"}, format="json").json()
    response = client_for(owner).post(f"/api/chats/{chat['id']}/messages", {"content": "hi"}, format="json")
    assert response.status_code == 200, response.content
    assert _server_timing(response)["app"] >= _server_timing(response)["model"] > 0


@pytest.mark.django_db(transaction=True)
def test_a_turn_outside_any_transaction_stores_both_messages_and_leaves_later_writes_durable(api, owner, model):
    from django.db import connection

    chat = new_chat(api)
    model.script(reply("Pasta."))
    before = api.get(f"/api/chats/{chat}").json()["updated_at"]
    send(api, chat, "What for dinner?")
    body = api.get(f"/api/chats/{chat}").json()
    assert [(m["role"], m["content"], m["typed_by_user"]) for m in body["messages"]] == [
        ("user", "What for dinner?", True), ("assistant", "Pasta.", False)]
    assert body["messages"][1]["memory"]["on"] is True
    assert body["updated_at"] > before
    with connection.cursor() as cursor:  # the messages' own commits did not change the connection's setting
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


def test_an_openai_client_without_a_chat_id_keeps_one_chat_per_conversation(owner, outsider, client_for, model):
    """Clients that resend the whole conversation but no chat id (most of them) get one chat per conversation,
    not one per message: the conversation so far finds the chat its last reply came from."""
    from localai_memory.chats.models import Chat, Message

    client = bearer(client_for, owner)

    def turn(messages, text):
        model.script(reply(text))
        response = client.post("/v1/chat/completions", {"messages": messages}, format="json")
        assert response.status_code == 200, response.content
        return int(response["X-Chat-Id"]), response.json()["choices"][0]["message"]["content"]

    talk = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Plan a trip to Porto."}]
    first, answer = turn(talk, "Two days: Ribeira, then Livraria Lello.")
    talk += [{"role": "assistant", "content": answer + "\n"}, {"role": "user", "content": "And by train?"}]
    second, answer = turn(talk, "Take the Alfa Pendular from Lisbon.")
    talk += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Book it."}]
    third, _ = turn(talk, "I cannot book, but here is the link.")
    assert first == second == third
    assert list(Message.objects.filter(chat_id=first).order_by("id").values_list("role", flat=True)) == [
        "user", "assistant"] * 3

    other, _ = turn([{"role": "user", "content": "Plan a trip to Porto."}], "Sure.")  # a new conversation
    assert other != first
    changed = [*talk[:2], {"role": "assistant", "content": "Something else."}, {"role": "user", "content": "Hm?"}]
    assert turn(changed, "?")[0] not in (first, other)  # an edited history is another conversation

    greeted, _ = turn([{"role": "user", "content": "hi"}], "Hello!")
    hello = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]
    one, _ = turn([*hello, {"role": "user", "content": "Tell me about Rome."}], "Rome is old.")
    two, _ = turn([*hello, {"role": "user", "content": "Tell me about Oslo."}], "Oslo is cold.")
    assert len({greeted, one, two}) == 3  # "hi" / "Hello!" is too common an opening to tell conversations apart

    same_words = bearer(client_for, outsider)  # the same conversation from somebody else: never Alice's chat
    model.script(reply("Hello."))
    theirs = same_words.post("/v1/chat/completions", {"messages": talk}, format="json")
    assert theirs.status_code == 200 and int(theirs["X-Chat-Id"]) != first
    assert Chat.objects.get(pk=int(theirs["X-Chat-Id"])).owner == outsider


def test_openai_clients_list_the_model_and_the_users_agents_and_pick_an_agent_as_a_model(
        owner, outsider, client_for, model, settings):
    from rest_framework.test import APIClient

    chef = make_agent(owner, instructions="You are Chef, who cooks.")
    make_agent(outsider, instructions="You are Mallory's agent.")
    client = bearer(client_for, owner)
    listed = client.get("/v1/models")
    assert listed.status_code == 200 and listed.json()["object"] == "list"
    ids = [m["id"] for m in listed.json()["data"]]
    assert ids == [settings.LLM_MODEL, f"agent-{chef.pk}"]  # Mallory's agent is not listed
    assert listed.json()["data"][1]["name"] == "Chef"
    assert APIClient().get("/v1/models").status_code in (401, 403)

    model.script(reply("Pasta."))
    response = client.post("/v1/chat/completions", {"model": f"agent-{chef.pk}", "messages": [
        {"role": "user", "content": "What should I cook tonight?"}]}, format="json")
    assert response.status_code == 200
    assert "You are Chef, who cooks." in model.last_request["messages"][0]["content"]
    from localai_memory.chats.models import Chat

    assert Chat.objects.get(pk=int(response["X-Chat-Id"])).agent_id == chef.pk

    theirs = Agent.objects.get(owner=outsider)
    refused = client.post("/v1/chat/completions", {"model": f"agent-{theirs.pk}", "messages": [
        {"role": "user", "content": "hi"}]}, format="json")
    assert refused.status_code == 404


def test_a_messaging_apps_conversation_is_answered_in_the_app_not_through_the_api(owner, client_for, model):
    """The bot sends a conversation's replies: a turn typed into it through the API would read its notes and
    store messages nobody in the app sees. Both chat routes refuse, as the web chat does."""
    from localai_memory.chats.models import Chat, Message
    from localai_memory.chats.services import chat_create
    from localai_memory.notes.paths import channel_key

    chat = chat_create(owner_id=owner.pk, origin="messaging", conversation_key=channel_key(7, "tg-42"),
                       title="Telegram: Alice")
    client = bearer(client_for, owner)
    response = client.post(f"/api/chats/{chat.pk}/messages", {"content": "hi"}, format="json")
    assert response.status_code == 409 and response.json()["error"]["code"] == "answer_in_the_app"
    response = client.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
                           format="json", HTTP_X_CHAT_ID=str(chat.pk))
    assert response.status_code == 409 and response.json()["error"]["code"] == "answer_in_the_app"
    assert not model.requests and not Message.objects.filter(chat=chat).exists()
    assert Chat.objects.filter(owner=owner).count() == 1
    job = chat_create(owner_id=owner.pk, origin="job", title="Nightly summary")  # a run's chat: the run's own
    response = client.post(f"/api/chats/{job.pk}/messages", {"content": "hi"}, format="json")
    assert response.status_code == 409 and "from a run" in response.json()["error"]["message"]


def test_an_openai_client_retrying_after_a_model_failure_continues_that_chat(owner, client_for, model):
    """The model server fails; the client sends the same conversation again: the chat that kept the question
    answers it (no second chat, the question once), for a first message and for a later one alike."""
    from localai_memory.chats.models import Chat, Message

    client = bearer(client_for, owner)
    first = [{"role": "user", "content": "Plan a trip to Porto."}]
    model.fail_next(500)
    failed = client.post("/v1/chat/completions", {"messages": first}, format="json")
    assert failed.status_code == 502
    model.script(reply("Two days: Ribeira, then Livraria Lello."))
    retried = client.post("/v1/chat/completions", {"messages": first}, format="json")
    assert retried.status_code == 200, retried.content
    chat_id = int(retried["X-Chat-Id"])
    assert Chat.objects.filter(owner=owner).count() == 1

    later = [*first, {"role": "assistant", "content": "Two days: Ribeira, then Livraria Lello."},
             {"role": "user", "content": "And by train from Lisbon?"}]
    model.fail_next(500)
    assert client.post("/v1/chat/completions", {"messages": later}, format="json").status_code == 502
    model.script(reply("Take the Alfa Pendular."))
    again = client.post("/v1/chat/completions", {"messages": later}, format="json")
    assert int(again["X-Chat-Id"]) == chat_id and Chat.objects.filter(owner=owner).count() == 1
    assert list(Message.objects.filter(chat_id=chat_id).order_by("id").values_list("role", "content")) == [
        ("user", "Plan a trip to Porto."), ("assistant", "Two days: Ribeira, then Livraria Lello."),
        ("user", "And by train from Lisbon?"), ("assistant", "Take the Alfa Pendular.")]


def test_an_agents_instructions_and_the_clients_system_prompt_make_one_system_message(owner, client_for, model):
    agent = make_agent(owner, instructions="You are Chef.")
    response = bearer(client_for, owner).post("/v1/chat/completions", {"agent": agent.pk, "messages": [
        {"role": "system", "content": "Answer in French."}, {"role": "user", "content": "What is for dinner?"}]},
        format="json")
    assert response.status_code == 200, response.content
    sent = model.last_request["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0]["content"].startswith("You are Chef.\n\nAnswer in French.")


def test_a_system_message_the_client_adds_along_the_way_joins_the_one_system_message(owner, client_for, model):
    response = bearer(client_for, owner).post("/v1/chat/completions", {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Plan a trip to Porto."},
        {"role": "assistant", "content": "Sure."}, {"role": "developer", "content": "Context: it rains in Porto."},
        {"role": "user", "content": "What should I pack?"}]}, format="json")
    assert response.status_code == 200, response.content
    sent = model.last_request["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[0]["content"].startswith("Be brief.\n\nContext: it rains in Porto.")
