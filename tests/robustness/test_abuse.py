"""Abuse a person or an attacker would try: guessing passwords, signing up in bulk, reading tokens out of a
leaked database, reading notes out of the logs, framing the pages, and posting forms from another site."""

from __future__ import annotations

import hashlib
import logging
import re
import uuid

import httpx
import pytest
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from localai_memory.accounts.models import ApiToken
from localai_memory.accounts.services import token_create
from localai_memory.memory.models import Proposal
from tests.core.test_wsgi import running_app
from tests.fakes.openai_server import reply, tool_calls

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


def address() -> str:
    """A client address of its own, so the throttle's memory (Redis) of other runs never counts."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


@pytest.fixture
def throttled(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth": "3/min"}}


def test_a_password_guesser_is_stopped_with_429_after_a_few_tries(owner, throttled):
    client, ip = APIClient(), address()
    answers = [client.post("/api/auth/token", {"username": "alice", "password": f"guess{n}"}, format="json",
                           REMOTE_ADDR=ip) for n in range(3)]
    assert [a.status_code for a in answers] == [400, 400, 400]

    stopped = client.post("/api/auth/token", {"username": "alice", "password": PASSWORD}, format="json",
                          REMOTE_ADDR=ip)

    assert stopped.status_code == 429
    assert stopped.json()["error"]["code"] == "throttled"
    assert int(stopped["Retry-After"]) > 0
    elsewhere = client.post("/api/auth/token", {"username": "alice", "password": PASSWORD}, format="json",
                            REMOTE_ADDR=address())
    assert elsewhere.status_code == 200


def test_a_guesser_cannot_name_a_new_address_in_x_forwarded_for_to_escape_the_throttle(owner, throttled):
    client, ip = APIClient(), address()
    answers = [client.post("/api/auth/token", {"username": "alice", "password": f"guess{n}"}, format="json",
                           REMOTE_ADDR=ip, HTTP_X_FORWARDED_FOR=address()).status_code for n in range(4)]
    assert answers == [400, 400, 400, 429]


def test_behind_one_proxy_the_address_it_adds_is_the_clients(owner, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth": "3/min"},
                               "NUM_PROXIES": 1}
    proxy, guesser = address(), address()
    answers = [APIClient().post("/api/auth/token", {"username": "alice", "password": f"guess{n}"}, format="json",
                                REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{address()}, {guesser}").status_code
               for n in range(4)]
    assert answers == [400, 400, 400, 429]  # the spoofed first hop changes each time; the proxy's entry does not
    someone_else = APIClient().post("/api/auth/token", {"username": "alice", "password": PASSWORD}, format="json",
                                    REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=address())
    assert someone_else.status_code == 200


def test_signing_up_in_bulk_is_stopped_with_429(db, throttled, settings):
    settings.OPEN_SIGNUP = True
    client, ip = APIClient(), address()
    made = [client.post("/api/auth/register", {"username": f"bulk{n}-{uuid.uuid4().hex[:6]}", "password": PASSWORD},
                        format="json", REMOTE_ADDR=ip).status_code for n in range(4)]
    assert made == [201, 201, 201, 429]


def test_the_login_page_stops_a_password_guesser_too_sharing_the_apis_budget(owner, throttled):
    from django.test import Client

    browser, ip = Client(), address()
    tries = [browser.post("/login/", {"username": "alice", "password": f"guess{n}"}, REMOTE_ADDR=ip) for n in range(2)]
    assert [t.status_code for t in tries] == [200, 200]  # "Wrong username or password."
    api = APIClient().post("/api/auth/token", {"username": "alice", "password": "guess3"}, format="json",
                           REMOTE_ADDR=ip)
    assert api.status_code == 400

    stopped = browser.post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR=ip)

    assert stopped.status_code == 429 and int(stopped["Retry-After"]) > 0
    assert "Too many tries from your address" in stopped.content.decode()
    assert "_auth_user_id" not in browser.session  # not logged in, even with the right password
    elsewhere = Client().post("/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR=address())
    assert elsewhere.status_code == 302


def test_the_admins_log_in_page_shares_the_budget(db, throttled):
    from django.contrib.auth import get_user_model
    from django.test import Client

    get_user_model().objects.create_superuser("root", "root@example.org", PASSWORD)
    browser, ip = Client(), address()
    tries = [browser.post("/admin/login/", {"username": "root", "password": f"guess{n}"}, REMOTE_ADDR=ip)
             for n in range(3)]
    assert [t.status_code for t in tries] == [200, 200, 200]

    stopped = browser.post("/admin/login/", {"username": "root", "password": PASSWORD}, REMOTE_ADDR=ip)

    assert stopped.status_code == 429 and int(stopped["Retry-After"]) > 0
    assert "_auth_user_id" not in browser.session
    assert Client().post("/admin/login/", {"username": "root", "password": PASSWORD},
                         REMOTE_ADDR=address()).status_code == 302


def test_the_admins_password_change_counts_old_password_tries(db, throttled):
    from django.contrib.auth import get_user_model
    from django.test import Client

    root = get_user_model().objects.create_superuser("root", "root@example.org", PASSWORD)
    browser, ip = Client(), address()
    browser.force_login(root)
    tries = [browser.post("/admin/password_change/", {"old_password": f"guess{n}", "new_password1": "x",
                                                      "new_password2": "x"}, REMOTE_ADDR=ip) for n in range(4)]

    assert [t.status_code for t in tries] == [200, 200, 200, 429]
    root.refresh_from_db()
    assert root.check_password(PASSWORD)


def test_the_sign_up_page_stops_signing_up_in_bulk(db, throttled, settings):
    from django.contrib.auth import get_user_model
    from django.test import Client

    settings.OPEN_SIGNUP = True
    ip = address()
    names = [f"bulk{n}-{uuid.uuid4().hex[:6]}" for n in range(4)]
    made = [Client().post("/register/", {"username": name, "password": PASSWORD, "password2": PASSWORD},
                          REMOTE_ADDR=ip).status_code for name in names]  # each signed up, then a new browser
    assert made == [302, 302, 302, 429]
    assert not get_user_model().objects.filter(username=names[3]).exists()


def test_a_burst_of_parallel_tries_gets_no_more_than_the_budget(db, settings):
    """The count and the check are one step: parallel tries that all read the same count do not all pass."""
    import threading

    from django.test import RequestFactory

    from localai_memory.accounts.throttling import too_many_tries

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"auth": "5/min"}}
    ip, start, passed = address(), threading.Barrier(24), []

    def attempt() -> None:
        request = RequestFactory().post("/login/", REMOTE_ADDR=ip)
        start.wait()
        passed.append(too_many_tries(request) is None)

    threads = [threading.Thread(target=attempt) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert passed.count(True) == 5


def test_a_try_counted_by_the_code_before_this_one_does_not_break_the_log_in(db):
    """During a deploy the old code's count (DRF's list, in the cache) may sit under an address's old key."""
    from django.core.cache import cache
    from django.test import RequestFactory

    from localai_memory.accounts.throttling import too_many_tries

    ip = address()
    cache.set(f"throttle_auth_{ip}", [1.0, 2.0], 60)
    assert too_many_tries(RequestFactory().post("/login/", REMOTE_ADDR=ip)) is None


def test_a_leaked_database_holds_no_working_token(owner):
    key = APIClient().post("/api/auth/token", {"username": "alice", "password": PASSWORD}, format="json",
                           REMOTE_ADDR=address()).json()["token"]

    found = []
    with connection.cursor() as cursor:
        cursor.execute("""SELECT table_name, column_name FROM information_schema.columns
                          WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb', 'json')""")
        for table, column in cursor.fetchall():
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text LIKE %s', [f"%{key[8:]}%"])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")

    assert found == []
    assert ApiToken.objects.filter(user=owner, key_hash=hashlib.sha256(key.encode()).hexdigest()).exists()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/chats/memory").status_code == 200


def test_no_note_token_or_secret_reaches_the_logs(db, caplog, model, settings, openai_server):
    """A whole workload at INFO: sign up, log in (and fail once), change settings, write a note, chat with a
    model that proposes a note, confirm and undo it, a model failure, the OpenAI-compatible route."""
    settings.OPEN_SIGNUP = True
    settings.LLM_API_KEY = openai_server.api_key = "sk-loopback-" + uuid.uuid4().hex
    caplog.set_level(logging.INFO)
    note = "my bank PIN is 4921 and the spare key is under the blue pot"
    proposed = "neighbour Quentin waters the ferns"
    client = APIClient(REMOTE_ADDR=address())
    key = client.post("/api/auth/register", {"username": "pat", "password": PASSWORD}, format="json").json()["token"]
    assert client.post("/api/auth/token", {"username": "pat", "password": "not " + PASSWORD},
                       format="json").status_code == 400
    second = client.post("/api/auth/token", {"username": "pat", "password": PASSWORD}, format="json").json()["token"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.put("/api/chats/memory", {"save_mode": "ask"}, format="json").status_code == 200
    assert api.put("/api/files/content?path=Memory/keys.md", {"content": note + "\n"},
                   format="json").status_code == 200
    chat = api.post("/api/chats", {}, format="json").json()["id"]
    model.script(tool_calls(("propose_change", {"kind": "memory", "topic": "ferns", "summary": proposed})),
                 reply("I will ask you first."))
    turn = api.post(f"/api/chats/{chat}/messages", {"content": f"Remember: {proposed}. Also {note}."},
                    format="json")
    assert turn.status_code == 200
    proposal = Proposal.objects.get(topic="ferns")
    change = api.post(f"/api/chats/memory/proposals/{proposal.pk}/confirm").json()["change"]["id"]
    assert api.post(f"/api/chats/changes/{change}/undo").status_code == 200
    model.fail_next(500)
    assert api.post(f"/api/chats/{chat}/messages", {"content": note}, format="json").status_code == 502
    openai = APIClient()
    openai.credentials(HTTP_AUTHORIZATION=f"Bearer {second}")
    assert openai.post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": note}]},
                       format="json").status_code == 200
    assert APIClient().get("/api/chats/memory", HTTP_AUTHORIZATION="Token " + key[:-4] + "XXXX").status_code == 401

    assert caplog.records, "the workload logged nothing at all: the check would prove nothing"
    logged = caplog.text + "\n".join(str(record.args) for record in caplog.records)
    for secret in (note, "bank PIN", proposed, "Quentin", key, second, key[8:], PASSWORD, settings.LLM_API_KEY):
        assert secret not in logged, f"{secret!r} is in the logs"


@pytest.mark.slow
def test_the_access_log_has_each_requests_status_and_time_but_no_note_text_or_name(transactional_db, make_user,
                                                                                   settings, tmp_path):
    """gunicorn's access log, as ``manage.py up`` and compose run it (the config alone turns it on): one line per
    request with its route, status and time, but never the address the client sent, which holds a search's
    words, a topic and note file names, in the query string and in the path."""
    owner = make_user("alice")
    browser = Client()
    browser.force_login(owner)  # a session the web pages (the note editor) accept
    with running_app(tmp_path, SECRET_KEY=settings.SECRET_KEY, LOG_LEVEL="INFO") as (url, _, log_path):
        file = "Memory/sister-called-giulia.md"
        with httpx.Client(base_url=url, timeout=60,
                          headers={"Authorization": f"Token {token_create(user=owner)}"}) as api:
            saved = api.put("/api/files/content", params={"path": file},
                            json={"content": "my sister is called Giulia\n"})
            assert saved.status_code == 200, saved.text
            assert api.get("/api/chats/memory/search", params={"q": "my secret diagnosis"}).status_code == 200
            assert api.delete("/api/chats/memory/notes", params={"topic": "dog-called-bruno"}).status_code == 404
            assert api.get("/api/files/" + file).status_code == 404  # no such route: its path is not logged
        with httpx.Client(base_url=url, timeout=60, cookies={"sessionid": browser.cookies["sessionid"].value},
                          headers={"Accept": "text/html"}) as web:
            assert web.get("/settings/memory/note/", params={"path": file}).status_code == 200
            assert web.get("/files/open/", params={"path": file}, headers={"Referer": url + "/files/?q=giulia"},
                           ).status_code == 200
    logged = log_path.read_text(errors="replace")
    for line in ('"PUT /api/files/content HTTP/1.1" 200', '"GET /api/chats/memory/search HTTP/1.1" 200',
                 '"DELETE /api/chats/memory/notes HTTP/1.1" 404', '"GET (no route) HTTP/1.1" 404',
                 '"GET /settings/memory/note/ HTTP/1.1" 200', '"GET /files/open/ HTTP/1.1" 200'):
        assert re.search(re.escape(line) + r" \d+ \d+ms$", logged, re.MULTILINE), f"no {line!r} in:\n{logged}"
    for secret in ("secret", "diagnosis", "bruno", "giulia", "sister", "?"):
        assert secret not in logged.lower(), f"{secret!r} is in the log:\n{logged}"


def test_pages_forbid_framing_sniffing_and_leaking_the_address(db):
    for url in ("/login/", "/api/schema/"):
        response = Client().get(url)
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_the_api_sends_the_same_headers(owner, client_for):
    response = client_for(owner).get("/api/chats/memory")
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_a_login_posted_without_the_csrf_token_is_refused(owner):
    browser = Client(enforce_csrf_checks=True)
    refused = browser.post("/login/", {"username": "alice", "password": PASSWORD})
    assert refused.status_code == 403

    token = browser.get("/login/").cookies["csrftoken"].value
    accepted = browser.post("/login/", {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token})
    assert accepted.status_code == 302


def test_a_signed_in_browser_cannot_be_made_to_change_settings_from_another_site(owner):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)

    forged = browser.put("/api/chats/memory", {"enabled": False}, content_type="application/json")
    forged_page = browser.post("/settings/memory/switch/", {"enabled": "off"})

    assert forged.status_code == 403
    assert forged_page.status_code == 403
    assert browser.get("/api/chats/memory").json()["enabled"] is True
