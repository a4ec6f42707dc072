"""The authorization matrix, generated from the URL configuration: every route, with every method it allows,
as an outsider (Mallory, with the ids of Alice's things), as anonymous and with a wrong token.

Nothing is listed by hand except the public routes (with why they are public) and how to make one of Alice's
objects for each kind of id a route can name; a new route is in the matrix the moment it is in urls.py, and
a route naming an id nobody taught this module fails the test until its object is added here.

What a person would notice, per route:

* **outsider**: a route aimed at one of Alice's objects answers 404 (API: JSON error; pages: the 404 page),
  never her data and never a 403 that confirms it exists; Django's admin sends non-staff to its login;
* **anonymous**: the API answers 401/403; pages redirect to the login page; the admin to its own login;
* **wrong token**: the API answers 401;
* Alice's things are exactly as they were afterwards.

A method a route does not allow (405 for a signed-in user) is left out; webhooks, which platforms call
without a session, must never answer 2xx without the platform's secret.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

from bridges import services as bridges_services
from bridges.models import Binding, Conversation, PairingRequest, Sender
from localai_memory.accounts.models import ApiToken
from localai_memory.accounts.services import token_create
from localai_memory.agents.models import Agent
from localai_memory.agents.services import agent_create
from localai_memory.chats.models import Chat, Message
from localai_memory.chats.services import chat_create, message_add
from localai_memory.memory.models import Proposal
from localai_memory.memory.proposals import proposal_create
from localai_memory.notes.models import ChangeSet, NoteFile, TrashEntry
from localai_memory.notes.paths import Scope
from localai_memory.notes.services import file_delete, note_upsert
from localai_memory.web.middleware import page_of

pytestmark = pytest.mark.django_db

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
API_PREFIXES = ("api/", "v1/", "mcp")

#: Routes anyone may call, and why. Everything else needs a signed-in user.
PUBLIC = {
    "api/auth/token": "exchanges a username and password for a token (throttled)",
    "api/auth/register": "signs up while open signup is on (throttled)",
    "api/schema/": "the OpenAPI schema: route shapes, no data",
    "api/docs/": "the API docs page over the schema",
    "login/": "the login page",
    "logout/": "ends the session (POST only)",
    "register/": "the signup page",
    "admin/login/": "the admin's login page",
    "admin/logout/": "ends an admin session",
}
#: Routes platforms call without a session; their own secret (token, signature) authenticates them.
WEBHOOKS = {"bridges/telegram/<int:binding_id>/webhook", "bridges/slack/<int:binding_id>/events"}
#: Routes that revoke every API token of the caller (Mallory's own): tried after all the others, which are
#: called with one of those tokens.
REVOKES_THE_CALLERS_TOKENS = {"account/tokens/revoke-all/"}


@dataclass(frozen=True)
class Route:
    route: str  # the pattern as written, prefixes included
    pattern: URLPattern
    namespace: str

    @property
    def is_api(self) -> bool:
        return self.route.startswith(API_PREFIXES)

    @property
    def is_admin(self) -> bool:
        return self.route.startswith("admin/")

    @property
    def kwargs(self) -> list[str]:
        if isinstance(self.pattern.pattern, RoutePattern):
            return re.findall(r"<(?:\w+:)?(\w+)>", str(self.pattern.pattern))
        return list(self.pattern.pattern.regex.groupindex)


def walk(patterns: list, prefix: str = "", namespace: str = "") -> Iterator[Route]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}:{entry.namespace}" if namespace and entry.namespace else entry.namespace or namespace
            yield from walk(entry.url_patterns, prefix + _text(entry.pattern), inner or "")
        else:
            yield Route(prefix + _text(entry.pattern), entry, namespace)


def _text(pattern: RoutePattern | RegexPattern) -> str:
    text = str(pattern)
    return text.lstrip("^").rstrip("$") if isinstance(pattern, RegexPattern) else text


ROUTES = list(walk(get_resolver().url_patterns))


# --------------------------------------------------------------------------------------------------------
# Alice's world: one object of every kind a route can name
# --------------------------------------------------------------------------------------------------------


@pytest.fixture
def alices(owner, outsider, settings) -> dict[str, str]:
    """The id to put in each URL kwarg: always one of Alice's objects (or, for non-object kwargs, a value
    that names nothing of Mallory's)."""
    # Nothing here should reach an outside party; if a route tries, it meets a closed loopback port at once.
    settings.TELEGRAM_API_BASE_URL = "http://127.0.0.1:9"
    settings.LLM_BASE_URL, settings.LLM_TIMEOUT = "http://127.0.0.1:9/v1", 5.0
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="home", summary="Lives in Rome", details="Trastevere",
                source="files", actor="you")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="scratch", summary="draft", source="files")
    entry = file_delete(owner_id=owner.pk, path="Memory/index.md")
    note_upsert(owner_id=owner.pk, scope=Scope.user(), topic="diet", summary="Vegetarian", source="files")
    agent = agent_create(owner_id=owner.pk, name="Chef")
    chat = chat_create(owner_id=owner.pk, agent_id=agent.pk, title="Dinner")
    message_add(chat=chat, role="user", content="What should I cook?", typed_by_user=True)
    proposal = proposal_create(owner_id=owner.pk, scope=Scope.user(), topic="tea", summary="Likes green tea",
                               chat_id=chat.pk)
    binding = bridges_services.binding_create(owner_id=owner.pk, platform="telegram", name="Family bot",
                                              mode="webhook", credentials={"token": "123456:MATRIX-TOKEN"})
    paired = bridges_services.sender_seen(binding_id=binding.pk, external_id="5550001", display="Alice")
    offer = bridges_services.pairing_offer(sender=paired)
    bridges_services.pairing_approve(binding=binding, code=offer.code, can_confirm=True)
    waiting = bridges_services.sender_seen(binding_id=binding.pk, external_id="5550009", display="Stranger")
    bridges_services.pairing_offer(sender=waiting)
    conversation = Conversation.objects.create(binding=binding, external_id="5550001", kind="one_to_one",
                                               channel_key=f"{binding.pk}-abcdef012345", chat=chat)
    # random, as the app's are: the cache (Redis) outlives a test session, whose user ids start again at 1, so a
    # fixed name could find a download a past session left for an "Alice" who had Mallory's id here
    export_token = f"alices-export-{secrets.token_hex(8)}"
    from localai_memory.web.views.agents import _export_key

    cache.set(_export_key(owner.pk, export_token), {"name": "chef.zip", "body": b"PK"}, 300)
    change = ChangeSet.objects.filter(owner=owner).first()
    token_create(user=owner, name="Alice's laptop")
    from django.utils import timezone

    from localai_memory.memory.models import AddonForgetRequest

    forget = AddonForgetRequest.objects.create(owner=owner, addon="sample", namespace=f"agent:{agent.pk + 1000}",
                                               whose="the notes of the agent “Baker”", answer="not_running",
                                               asked_at=timezone.now())
    return {
        "chat_id": str(chat.pk), "proposal_id": str(proposal.pk), "change_id": str(change.pk),
        "entry_id": str(entry.pk), "agent_id": str(agent.pk), "binding_id": str(binding.pk),
        "pairing_id": str(PairingRequest.objects.get(sender=waiting).pk), "sender_id": str(paired.pk),
        "conversation_id": str(conversation.pk), "token": export_token, "model_id": f"agent-{agent.pk}",
        "token_id": str(ApiToken.objects.get(user=owner).pk), "request_id": str(forget.pk),
        # not objects: a provider slot, and the admin's own kwargs (it sends non-staff to its login anyway)
        "slot": "memory", "app_label": "notes", "object_id": str(change.pk), "id": str(owner.pk),
        "content_type_id": str(ContentType.objects.get_for_model(ChangeSet).pk), "url": "nothing/here/",
    }


OBJECT_KWARGS = {"chat_id", "proposal_id", "change_id", "entry_id", "agent_id", "binding_id", "pairing_id",
                 "sender_id", "conversation_id", "token", "model_id", "token_id", "request_id"}


def alices_state(owner) -> tuple:
    """Everything of Alice's a request could change."""
    return (
        sorted(NoteFile.objects.filter(owner=owner).values_list("path", "content", "version")),
        ChangeSet.objects.filter(owner=owner).count(),
        sorted(TrashEntry.objects.filter(owner=owner).values_list("pk", "restored_at")),
        sorted(Proposal.objects.filter(owner=owner).values_list("pk", "status")),
        sorted(Agent.objects.filter(owner=owner).values_list("pk", "name", "instructions", "memory")),
        sorted(Chat.objects.filter(owner=owner).values_list("pk", "title", "private", "agent_id")),
        Message.objects.filter(chat__owner=owner).count(),
        sorted(Binding.objects.filter(owner=owner).values_list("pk", "name", "enabled")),
        sorted(Sender.objects.filter(binding__owner=owner).values_list("pk", "status", "can_confirm", "name")),
        sorted(PairingRequest.objects.filter(binding__owner=owner).values_list("pk", "status")),
        sorted(Conversation.objects.filter(binding__owner=owner).values_list("pk", "chat_id")),
        sorted(ApiToken.objects.filter(user=owner).values_list("pk", "name", "key_hash")),
        get_user_model().objects.values_list("password", flat=True).get(pk=owner.pk),
        sorted(owner.addon_forget_requests.values_list("pk", "answer", "asked_at")),
    )


def url_of(route: Route, values: dict[str, str]) -> str:
    missing = [name for name in route.kwargs if name not in values]
    assert not missing, (f"{route.route} names {missing}: add one of Alice's objects for it to the alices "
                         "fixture (and to OBJECT_KWARGS if it is an object id)")
    if isinstance(route.pattern.pattern, RoutePattern):
        url = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], route.route)
    else:
        url = route.route
        for name in route.kwargs:
            url = re.sub(rf"\(\?P<{name}>[^)]*\)", values[name], url)
        url = re.sub(r"[\^$]", "", url)
    return "/" + url


#: Words of Alice's notes, chats and token that no answer to Mallory may hold.
SECRETS = ("Rome", "Trastevere", "Vegetarian", "green tea", "What should I cook", "MATRIX-TOKEN")


def request(client: Client, method: str, url: str, **headers: str):
    return client.generic(method, url, data=b"{}" if method != "GET" else b"", content_type="application/json",
                          **{f"HTTP_{k}": v for k, v in headers.items()})


def describe(response) -> str:
    location = response.get("Location", "")
    return f"{response.status_code}{' -> ' + location if location else ''}"


def allowed_methods(route: Route, client: Client, url: str, headers: dict[str, str]) -> dict[str, object]:
    """Each method the route does not refuse with 405 for a signed-in outsider, with that answer. A web form's
    POST-only address opened with GET goes to its page instead of a blank 405 (``web.middleware``): that
    redirect is made of the address alone, so the answer checked is the page's (404 for a page of Alice's;
    a page of Mallory's own, such as her inbox, is left out: it is aimed at nothing of Alice's)."""
    answers = {}
    for method in METHODS:
        response = request(client, method, url, **headers)
        if method == "GET" and response.status_code == 302 and response["Location"] == page_of(url):
            for _ in range(3):  # the page itself may send on ("/" opens the chat list)
                response = request(client, "GET", response["Location"], **headers)
                if response.status_code != 302:
                    break
            if response.status_code == 200:
                continue
        if response.status_code != 405:
            answers[method] = response
    return answers


def signed_in(user) -> tuple[Client, dict[str, str]]:
    client = Client()
    client.force_login(user)
    return client, {"AUTHORIZATION": f"Token {token_create(user=user)}"}


def routes(kind: str) -> list[Route]:
    chosen = [r for r in ROUTES if r.route not in PUBLIC]
    if kind == "webhook":
        return [r for r in chosen if r.route in WEBHOOKS]
    chosen = [r for r in chosen if r.route not in WEBHOOKS]
    return sorted(chosen, key=lambda r: r.route in REVOKES_THE_CALLERS_TOKENS)  # stable: the rest keep their order


# --------------------------------------------------------------------------------------------------------
# The matrix
# --------------------------------------------------------------------------------------------------------


def test_the_matrix_covers_every_route_and_every_id_it_can_name():
    names = {r.route for r in ROUTES}
    assert set(PUBLIC) <= names, "a public route listed here no longer exists"
    assert WEBHOOKS <= names
    assert REVOKES_THE_CALLERS_TOKENS <= names
    assert len([r for r in ROUTES if not r.is_admin]) >= 60  # the app's own routes, not just the admin's
    unknown = {name for r in ROUTES for name in r.kwargs} - OBJECT_KWARGS - {
        "slot", "app_label", "object_id", "content_type_id", "url", "id"}
    assert not unknown, f"routes name ids this matrix cannot fill: {unknown}"


def test_an_outsider_gets_404_for_every_route_aimed_at_alices_things(owner, outsider, alices):
    before = alices_state(owner)
    client, headers = signed_in(outsider)
    failures, checked = [], 0
    for route in routes("app"):
        aimed = set(route.kwargs) & OBJECT_KWARGS
        url = url_of(route, alices)
        for method, response in allowed_methods(route, client, url, headers).items():
            if route.is_admin:
                ok = response.status_code == 302 and response["Location"].startswith("/admin/login/")
            elif aimed:
                ok = response.status_code == 404
                if ok and route.is_api:
                    ok = response.json()["error"]["code"] in ("not_found",) or "error" in response.json()
            else:
                continue  # no id in the URL: nothing of Alice's to aim at (the anonymous test covers it)
            checked += 1
            if not ok:
                failures.append(f"{method} {url} as Mallory: {describe(response)} {response.content[:120]!r}")
            body = response.content.decode(errors="replace")
            for secret in SECRETS:
                if secret in body:
                    failures.append(f"{method} {url} as Mallory shows Alice's {secret!r}")
    assert not failures, "\n".join(failures)
    assert checked >= 40
    assert client.session.get("_auth_user_id") == str(outsider.pk), "a route ended Mallory's session midway"
    assert alices_state(owner) == before


def test_alice_herself_reaches_her_things_on_the_same_routes(owner, alices):
    """The other side of the 404s: the ids are real, so a 404 is about ownership."""
    client, headers = signed_in(owner)
    failures = []
    for route in routes("app"):
        if route.is_admin or not set(route.kwargs) & OBJECT_KWARGS:
            continue
        url = url_of(route, alices)
        response = request(client, "GET", url, **headers)
        if response.status_code in (404,):
            failures.append(f"GET {url} as Alice: {describe(response)}")
    assert not failures, "\n".join(failures)


def test_anonymous_is_refused_on_every_route_that_is_not_public(outsider, alices):
    client, headers = signed_in(outsider)
    anonymous = Client()
    failures, checked = [], 0
    for route in routes("app"):
        url = url_of(route, alices)
        for method in allowed_methods(route, client, url, headers):
            response = request(anonymous, method, url)
            checked += 1
            if route.is_admin:
                ok = response.status_code == 302 and response["Location"].startswith("/admin/login/")
            elif route.is_api:
                ok = response.status_code in (401, 403) and "error" in response.json()
            else:
                ok = (response.status_code == 302 and response["Location"].startswith("/login/")) or \
                    response.status_code in (401, 403)
            if not ok:
                failures.append(f"{method} {url} anonymous: {describe(response)} {response.content[:100]!r}")
    assert not failures, "\n".join(failures)
    assert checked >= 80


def test_a_wrong_token_is_refused_on_every_api_route(outsider, alices):
    client, headers = signed_in(outsider)
    wrong = Client()
    failures, checked = [], 0
    for route in routes("app"):
        if not route.is_api:
            continue
        url = url_of(route, alices)
        for method in allowed_methods(route, client, url, headers):
            for header in ("Token lm_not-a-real-token", "Bearer lm_not-a-real-token"):
                response = request(wrong, method, url, AUTHORIZATION=header)
                checked += 1
                if response.status_code != 401:
                    failures.append(f"{method} {url} with {header!r}: {describe(response)}")
    assert not failures, "\n".join(failures)
    assert checked >= 40


def test_no_webhook_answers_2xx_without_the_platforms_secret(owner, alices):
    failures = []
    for route in routes("webhook"):
        url = url_of(route, alices)
        for method in METHODS:
            response = Client().generic(method, url, data=json.dumps({"update_id": 1, "type": "url_verification",
                                                                      "challenge": "x"}),
                                        content_type="application/json")
            if response.status_code < 300:
                failures.append(f"{method} {url} without a secret: {describe(response)}")
    assert not failures, "\n".join(failures)
