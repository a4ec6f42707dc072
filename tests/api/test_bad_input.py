"""Bad input on every route gets a 4xx JSON error, never a 500: wrong types, unknown values, oversized
bodies, paths with '..', NUL bytes (raw and %00 in the query string), unknown topics, non-JSON bodies and
JSON arrays instead of objects."""

from __future__ import annotations

import json
from urllib.parse import quote, urlencode

import pytest
from django.conf import settings
from django.test import Client

from localai_memory.notes.models import NoteFile

from .conftest import (
    PUBLIC_ROUTES,
    api_routes,
    assert_error,
    assert_json_4xx,
    fill_route,
    openapi_schema,
    takes_a_body,
)

FILE_ROUTES = ["/api/files/content", "/api/files/history"]

BAD_PATHS = [
    "../etc/passwd", "Memory/../index.md", "Memory/../../etc/passwd", "Memory/agents/../index.md", "..",
    "Memory/a\x00.md", "Memory/index.md\x00", "\x00", "Memory/UPPER.md", "Notes/a.md", "memory/index.md",
    "Memory/agents/x/index.md", "Memory/agents/7/8/index.md", "Memory/a/b/c/d.md", "Memory/a.txt", "Memory",
    "Memory/", "/", "", " ", "Memory/" + "a" * 41 + ".md", "Memory/" + "a" * 300 + ".md", "Memory\\index.md",
    "Memory//index.md", "Memory/./index.md", "Memory/.md", "Memory/-.md.md", "Memory/channels/nohash/index.md",
    "Memory/inde\u0301x.md", "Memory/\u00e9.md", "Memory/a b.md", "C:\\Memory\\index.md", "Memory/index.md?x=1",
    # A line break after a name ($ in a pattern lets one through).
    "Memory/a\n.md", "Memory/agents/1\n/index.md", "Memory/channels/1-abcdef\n/index.md",
]


def raw_query(path: str, query: str) -> str:
    return f"{path}?{query}"


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_a_bad_path_is_a_400_on_every_files_route_and_writes_nothing(api, owner, bad):
    query = urlencode({"path": bad})
    for route in FILE_ROUTES:
        assert_error(api.get(f"{route}?{query}"), 400)
    assert_error(api.put(f"/api/files/content?{query}", {"content": "x"}, format="json"), 400)
    assert_error(api.delete(f"/api/files/content?{query}"), 400)
    assert_error(api.post("/api/files/history/restore", {"path": bad, "version": 1}, format="json"), 400)
    assert not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("query", ["path=Memory%2Findex.md%00", "path=%00", "path=Memory%00%2Findex.md",
                                   "path=Memory/index.md%00.txt", "path=%2e%2e%2fetc%2fpasswd",
                                   "path=Memory%2F..%2Findex.md", "path=Memory%2F%ff%fe.md", "path=%c0%ae%c0%ae",
                                   "path=Memory%2Findex.md&path=..%2Fx", "path", "path=", "pa%00th=Memory"])
@pytest.mark.parametrize("method,route", [("GET", "/api/files/content"), ("PUT", "/api/files/content"),
                                          ("DELETE", "/api/files/content"), ("GET", "/api/files/history"),
                                          ("GET", "/api/files")])
def test_url_encoded_nul_bytes_and_dot_dots_in_the_query_string_are_refused(api, owner, method, route, query):
    if route == "/api/files" and query in ("path", "path=", "pa%00th=Memory"):
        query = "path=Memory%2F%00"  # no folder is the whole Memory folder; aim at the listing differently
    response = api.generic(method, raw_query(route, query), json.dumps({"content": "x"}),
                           content_type="application/json")
    assert_json_4xx(response)
    assert not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("route", ["/api/files/content", "/api/files/history"])
def test_a_missing_path_is_a_400(api, route):
    assert_error(api.get(route), 400, "missing_parameter")


@pytest.mark.parametrize("folder", ["Memory/..", "../Memory", "Memory/agents/../..", "Notes", "Memory%00",
                                    "Memory\x00", "x" * 300, "Memory/index.md", "Memory/agents/x",
                                    "Memory/agents/7/sub", "Memory/\ufffd", "Memory/other", "MemoryX"])
def test_a_bad_folder_in_the_listing_is_a_400(api, folder):
    assert_error(api.get("/api/files?" + urlencode({"path": folder})), 400)


@pytest.mark.parametrize("folder", [None, "", "/", "Memory", "Memory/", "/Memory", "Memory/agents",
                                    "Memory/agents/7", "Memory/channels", "Memory/channels/3-0a1b2c3d4e5f"])
def test_every_real_folder_can_be_listed(api, folder):
    response = api.get("/api/files", {} if folder is None else {"path": folder})
    assert response.status_code == 200
    assert response.json()["files"] == []


def test_an_unknown_topic_is_a_404_on_read_history_delete_and_restore(api):
    assert_error(api.get("/api/files/content?path=Memory/no-such-topic.md"), 404)
    assert_error(api.get("/api/files/history?path=Memory/no-such-topic.md"), 404)
    assert_error(api.delete("/api/files/content?path=Memory/no-such-topic.md"), 404)
    assert_error(api.post("/api/files/history/restore", {"path": "Memory/no-such-topic.md", "version": 1},
                          format="json"), 404)


BAD_FILE_BODIES = [
    {}, {"version": 1}, {"content": None}, {"content": 1}, {"content": True}, {"content": ["x"]},
    {"content": {"x": 1}}, {"content": "a\x00b"}, {"content": "x", "version": "1"}, {"content": "x", "version": 1.5},
    {"content": "x", "version": True}, {"content": "x", "version": 0}, {"content": "x", "version": -1},
    {"content": "x", "version": 2 ** 64}, {"content": "x", "version": [1]}, {"content": "x", "other": 1},
    {"content": "x" * (64 * 1024 + 1)}, {"content": "x" * (8 * 1024 + 1)},
]


@pytest.mark.parametrize("path", ["Memory/index.md", "Memory/home.md"])
@pytest.mark.parametrize("body", BAD_FILE_BODIES)
def test_a_bad_file_body_is_a_4xx_and_writes_nothing(api, owner, path, body):
    assert_json_4xx(api.put("/api/files/content?" + urlencode({"path": path}), body, format="json"))
    assert not NoteFile.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("text", ["not an index line\n", "- Home: capital topic\n", "- home: x\n- home: y\n",
                                  "- home:\n", "-home: x\n"])
def test_an_index_that_does_not_parse_is_a_400_naming_the_line(api, owner, text):
    error = assert_error(api.put("/api/files/content?path=Memory/index.md", {"content": text}, format="json"), 400)
    assert "line" in error["message"]
    assert not NoteFile.objects.filter(owner=owner).exists()


def test_a_topic_file_over_8_kib_is_refused_with_its_current_text(api, owner):
    error = assert_error(api.put("/api/files/content?path=Memory/home.md", {"content": "x" * (8 * 1024 + 1)},
                                 format="json"), 400, "topic_too_large")
    assert error["details"] == {"path": "Memory/home.md", "max_bytes": 8192, "bytes": 8193, "current": None}
    version = api.put("/api/files/content?path=Memory/home.md", {"content": "Rome\n"}, format="json").json()
    error = assert_error(api.put("/api/files/content?path=Memory/home.md",
                                 {"content": "y" * 9000, "version": version["version"]}, format="json"),
                         400, "topic_too_large")
    assert error["details"]["current"] == "Rome\n"
    assert api.get("/api/files/content?path=Memory/home.md").json()["content"] == "Rome\n"


@pytest.mark.parametrize("body", [{}, {"path": "Memory/home.md"}, {"version": 1},
                                  {"path": "Memory/home.md", "version": "1"},
                                  {"path": "Memory/home.md", "version": 0},
                                  {"path": "Memory/home.md", "version": 2 ** 70},
                                  {"path": 1, "version": 1}, {"path": None, "version": 1},
                                  {"path": ["Memory/home.md"], "version": 1},
                                  {"path": "Memory/home.md", "version": 1, "force": True}])
def test_a_bad_version_restore_body_is_a_4xx(api, body):
    api.put("/api/files/content?path=Memory/home.md", {"content": "x"}, format="json")
    assert_json_4xx(api.post("/api/files/history/restore", body, format="json"))


@pytest.mark.parametrize("version", ["abc", "-1", "0", "1.5", "\u00b2", "\u0661", "99999999999999999999999999",
                                     "", " 1", "1e3", "0x1"])
def test_a_bad_version_on_delete_is_a_4xx_and_keeps_the_file(api, owner, version):
    api.put("/api/files/content?path=Memory/home.md", {"content": "x"}, format="json")
    response = api.delete("/api/files/content?" + urlencode({"path": "Memory/home.md", "version": version}))
    assert_json_4xx(response)
    assert NoteFile.objects.filter(owner=owner, path="Memory/home.md").exists()


@pytest.mark.parametrize("query", ["limit=abc", "limit=-5", "limit=%C2%B2", "limit=%D9%A1",
                                   "limit=99999999999999999999999", "limit=0", "automatic=maybe", "limit=%00",
                                   "automatic=%00", "limit=1.5"])
def test_odd_audit_parameters_never_break_it(api, query):
    response = api.get("/api/chats/changes/audit?" + query)
    assert response.status_code < 500
    if response.status_code >= 400:
        assert_json_4xx(response)


@pytest.mark.parametrize("route", ["/api/files/trash/{}/restore", "/api/chats/changes/{}/undo"])
@pytest.mark.parametrize("ident", ["0", "99999999999999999999999999", "9223372036854775808", "00001",
                                   "-1", "abc", "1%00", "1.5", "%20"])
def test_odd_ids_in_the_url_are_a_404(api, route, ident):
    assert_error(api.post(route.format(ident)), 404)


# --- every route of the URL conf: non-JSON bodies, arrays, oversized bodies, invalid Unicode ----------------

WRITE_ROUTES = [(m, r) for m, r in api_routes() if m in ("POST", "PUT", "PATCH", "DELETE")]
_SCHEMA = openapi_schema()
# Operations that read a JSON body (by the schema); a route without one may ignore what is sent, but never 500s.
BODY_ROUTES = [(m, r) for m, r in WRITE_ROUTES if takes_a_body(m, r, _SCHEMA)]
BODYLESS_ROUTES = [(m, r) for m, r in WRITE_ROUTES if (m, r) not in BODY_ROUTES]


def call(client, method: str, route: str, body: bytes, content_type: str = "application/json"):
    return client.generic(method, fill_route(route), body, content_type=content_type)


NOT_JSON_OBJECTS = [b"[]", b"[1, 2]", b'"text"', b"null", b"42", b"true", b"{", b"{'a': 1}", b"\xff\xfe\x00",
                    b'{"a": NaN}', b'{"a": Infinity}', b"\x00", b'{"a": 1}{"b": 2}', b" ", b"1" * 5000,
                    b"[" * 100_000, b'{"a":' * 50_000, b'{"a": "\\u0000"}', b'{"": ""}', b'{"a": 1e999999}',
                    b'{"a": ' + b"9" * 5000 + b"}"]
OTHER_MEDIA_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                     "application/xml", "application/json; charset=latin-1", "application/json; charset=nonsense"]

# A lone surrogate is valid JSON (\ud800) but not valid Unicode text: it can never reach the database.
SURROGATE_BODIES = [b'{"content": "\\ud800"}', b'{"\\udfff": 1}', b'{"provider": "\\ud83d"}',
                    b'{"path": "Memory/\\ud800.md", "version": 1}', b'{"username": "\\ud800", "password": "x"}',
                    b'{"username": "bob", "password": "\\ud800\\ud800\\ud800\\ud800\\ud800\\ud800\\ud800x"}',
                    b'{"save_mode": "\\ud800"}', b'{"confirm": true, "\\ud800": 1}', b'{"name": "\\ud800"}',
                    b'{"content": "\\ud800", "agent": "\\udfff"}']


def failures_of(client, method: str, route: str, bodies: list[bytes],
                content_types: tuple[str, ...] = ("application/json",)) -> list[str]:
    """Each (body, media type) that did not get a 4xx JSON error, with what it got instead."""
    client.raise_request_exception = False  # a 500 comes back as a response, so one run names them all
    failures = []
    for content_type in content_types:
        for body in bodies:
            try:
                assert_json_4xx(call(client, method, route, body, content_type))
            except AssertionError as exc:
                failures.append(f"{content_type} {body[:40]!r}: {str(exc)[:300]}")
    return failures


@pytest.mark.parametrize("method,route", BODY_ROUTES)
def test_a_body_that_is_not_a_json_object_is_a_4xx_json_error(api, method, route):
    assert failures_of(api, method, route, NOT_JSON_OBJECTS) == []


@pytest.mark.parametrize("method,route", BODY_ROUTES)
def test_a_body_of_another_media_type_is_a_4xx_json_error(api, method, route):
    assert failures_of(api, method, route, [b"a=1", b'{"a": 1}'], tuple(OTHER_MEDIA_TYPES)) == []


@pytest.mark.parametrize("method,route", [r for r in BODY_ROUTES if r[1] != "api/auth/token"])
def test_lone_surrogates_in_a_json_body_are_a_4xx(api, method, route):
    assert failures_of(api, method, route, SURROGATE_BODIES) == []


@pytest.mark.parametrize("method,route", BODYLESS_ROUTES)
def test_a_route_without_a_body_never_breaks_on_one(api, method, route):
    for body in NOT_JSON_OBJECTS + SURROGATE_BODIES:
        response = call(api, method, route, body)
        assert response.status_code < 500, (body[:40], response.status_code, response.content[:300])
        if response.status_code != 204:  # a delete of the caller's own object (the placeholder id names it) has none
            assert response["Content-Type"].startswith("application/"), response["Content-Type"]


@pytest.mark.parametrize("method,route", WRITE_ROUTES)
def test_a_body_over_the_upload_limit_is_a_413_json_error(api, method, route):
    body = b'{"content": "' + b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b'"}'
    assert_error(call(api, method, route, body), 413, "too_large")


def test_the_413_comes_before_authentication(anon_api):
    body = b"x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    assert_error(anon_api.generic("POST", "/api/auth/token", body, content_type="application/json"), 413)


@pytest.mark.parametrize("route", ["api/auth/token", "api/auth/register"])
def test_lone_surrogates_in_credentials_are_a_4xx(db, settings, route):
    from rest_framework.test import APIClient

    settings.OPEN_SIGNUP = True
    assert failures_of(APIClient(REMOTE_ADDR="10.250.0.1"), "POST", route, SURROGATE_BODIES) == []


@pytest.mark.parametrize("body", [{"username": 1, "password": 2}, {"username": None, "password": "x"},
                                  {"username": ["alice"], "password": "x"}, {"username": "alice"}, {},
                                  {"username": "a\x00", "password": "x"}, {"username": "a" * 151, "password": "x"},
                                  {"username": "alice", "password": "p" * 257}])
@pytest.mark.parametrize("route", ["/api/auth/token", "/api/auth/register"])
def test_bad_credential_bodies_are_a_400(db, settings, route, body):
    from rest_framework.test import APIClient

    settings.OPEN_SIGNUP = True
    assert_error(APIClient(REMOTE_ADDR="10.250.0.2").post(route, body, format="json"), 400)


@pytest.mark.parametrize("method,route", [r for r in api_routes() if r[1] not in PUBLIC_ROUTES])
def test_a_nul_byte_in_any_query_string_never_breaks_a_route(api, method, route):
    url = fill_route(route) + "?path=Memory%2Findex.md%00&limit=%00&memory=%00&x%00=1"
    response = api.generic(method, url, b"{}", content_type="application/json")
    assert response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/"), response["Content-Type"]


@pytest.mark.parametrize("method,route", [r for r in api_routes() if r[1] not in PUBLIC_ROUTES])
def test_more_query_parameters_than_django_reads_are_a_400_json_error(api, method, route):
    """A query string of thousands of short parameters fits gunicorn's request line: the app answers it as JSON."""
    url = fill_route(route) + "?" + "&".join(f"p{n}=1" for n in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    assert_error(api.generic(method, url, b"{}", content_type="application/json"), 400, "too_many_parameters")


@pytest.mark.parametrize("method,route", [r for r in api_routes() if r[1] not in PUBLIC_ROUTES and "<" in r[1]])
def test_ids_out_of_range_never_break_a_route(api, method, route):
    for ident in ["99999999999999999999999999", "9223372036854775808", "2147483648", "0", "000"]:
        response = api.generic(method, fill_route(route, ident), b"{}", content_type="application/json")
        assert_json_4xx(response)


@pytest.mark.parametrize("method,url", [
    ("DELETE", "/api/files/content?path=Memory%2Fhome.md&path=Memory%2Fdiet.md"),
    ("DELETE", "/api/files/content?path=Memory%2Fhome.md&version=1&version=2"),
    ("PUT", "/api/files/content?path=Memory%2Fhome.md&path=Memory%2Fdiet.md"),
    ("DELETE", "/api/chats/memory/notes?topic=home&topic=diet"),
    ("GET", "/api/files?path=Memory&path=Memory%2Fagents"),
    ("GET", "/api/files/content?path=Memory%2Fhome.md&path=Memory%2Fhome.md"),  # the same twice too
    ("GET", "/api/files/history?path=Memory%2Fhome.md&path=Memory%2Fdiet.md"),
    ("GET", "/api/chats/changes/audit?limit=5&limit=500"),
    ("GET", "/api/chats/changes/audit?automatic=true&automatic=false"),
    ("GET", "/api/chats/memory/notes?category=fact&category=preference"),
    ("GET", "/api/chats/memory/search?q=Rome&q=diet"),
    ("GET", "/api/chats/memory/search?q=Rome&scope=user&scope=agent%3A7"),
    ("GET", "/api/chats/memory/proposals?status=pending&status=all"),
])
def test_a_query_parameter_given_twice_is_a_400_naming_it_and_changes_nothing(api, owner, method, url):
    """One of two values was taken silently (the last): a delete or a write acted on what the client may not
    have meant, and a read answered a question it did not ask. Every API route reads its query the one way."""
    for topic in ("home", "diet"):
        api.put(f"/api/files/content?path=Memory%2F{topic}.md", {"content": f"{topic} text"}, format="json")
    before = sorted(NoteFile.objects.filter(owner=owner).values_list("path", "version", "content"))
    body = {"content": "overwritten"} if method == "PUT" else None

    error = assert_error(api.generic(method, url, json.dumps(body) if body else b"",
                                     content_type="application/json"), 400, "repeated_parameter")

    name = url.split("&")[-1].split("=")[0]
    assert error["message"].startswith(f"the query parameter {name!r} is given 2 times (")
    assert error["message"].endswith("): send it once")
    assert sorted(NoteFile.objects.filter(owner=owner).values_list("path", "version", "content")) == before


def test_a_nul_in_the_route_itself_is_a_json_404(api):
    assert_error(api.get("/api/files%00"), 404)
    assert_error(api.get("/api/files/trash/" + quote("1\x00") + "/restore"), 404)


@pytest.mark.parametrize("fmt", ["x", "json", "api"])
def test_a_format_query_parameter_means_nothing_rather_than_a_404(api, fmt):
    assert api.get(f"/api/chats/memory?format={fmt}").status_code == 200
    export = api.get(f"/api/chats/memory/export?format={fmt}")
    assert export.status_code == 200 and export["Content-Type"] == "application/zip"


@pytest.mark.parametrize("route", ["/api/chats/memory", "/v1/models", "/mcp"])
def test_a_host_the_server_was_not_told_of_is_a_json_400_that_names_allowed_hosts(api, route):
    """Served on ``HOST=0.0.0.0`` and reached by another name or address: the API answers in JSON, as for every
    other error, and says what the administrator must change (Django's bare "Bad Request (400)" said nothing)."""
    error = assert_error(api.get(route, HTTP_HOST="memory.example.org"), 400, "disallowed_host")
    assert "ALLOWED_HOSTS" in error["message"]


def test_a_page_reached_by_a_host_the_server_was_not_told_of_stays_a_page(db):
    response = Client().get("/login/", HTTP_HOST="memory.example.org")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
