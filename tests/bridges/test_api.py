"""The bridges API: bindings with write-only encrypted credentials, status, senders and pairing; and an
outsider who should have no access to Alice's bots."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from bridges import services
from bridges.models import Binding

pytestmark = pytest.mark.django_db

TOKEN = "123456:SECRET-TELEGRAM-TOKEN-xyz"


def create(api, **body):
    payload = {"platform": "telegram", "name": "Family bot", "credentials": {"token": TOKEN}, **body}
    return api.post("/api/bridges/bindings", payload, format="json")


def test_a_binding_is_created_and_its_credentials_are_never_shown_back(api):
    created = create(api)

    assert created.status_code == 201, created.content
    body = created.json()
    assert body["platform"] == "telegram" and body["mode"] == "polling" and body["enabled"] is True
    assert body["credentials_set"] == ["token"]
    listed = api.get("/api/bridges/bindings").content.decode()
    shown = api.get(f"/api/bridges/bindings/{body['id']}").content.decode()
    assert TOKEN not in created.content.decode() + listed + shown
    assert "webhook_secret" not in listed


def test_credentials_are_encrypted_at_rest(api):
    binding_id = create(api).json()["id"]

    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials FROM bridges_binding WHERE id = %s", [binding_id])
        [stored] = cursor.fetchone()

    assert TOKEN not in stored and "SECRET" not in stored
    assert services.crypto.decrypt(stored)["token"] == TOKEN


def test_new_credentials_are_merged_and_a_field_left_out_stays(api):
    binding_id = create(api, platform="slack", mode="http",
                        credentials={"bot_token": "xoxb-one-1", "signing_secret": "secret-one-1"}).json()["id"]

    changed = api.patch(f"/api/bridges/bindings/{binding_id}", {"credentials": {"bot_token": "xoxb-two-2"},
                                                                "name": "Team"}, format="json")

    assert changed.status_code == 200 and changed.json()["name"] == "Team"
    stored = services.crypto.decrypt(Binding.objects.get(pk=binding_id).credentials)
    assert stored == {"bot_token": "xoxb-two-2", "signing_secret": "secret-one-1"}


@pytest.mark.parametrize("body, code", [
    ({"platform": "irc"}, "invalid"),
    ({"mode": "gateway"}, "invalid_mode"),
    ({"credentials": {}}, "missing_credentials"),
    ({"credentials": {"token": "short"}}, "invalid_credentials"),
    ({"credentials": {"password": "x" * 20}}, "invalid_credentials"),
    ({"credentials": "a string"}, "invalid_credentials"),
    ({"platform": "slack", "mode": "socket", "credentials": {"bot_token": "xoxb-1234"}}, "missing_credentials"),
    ({"agent": 999999}, "agent_not_found"),
    ({"surprise": 1}, "unknown_field"),
])
def test_a_binding_that_cannot_work_is_refused_with_a_clear_error(api, body, code):
    response = create(api, **body)

    assert response.status_code in (400, 404), response.content
    assert response.json()["error"]["code"] == code


def test_disable_and_enable_are_reflected_in_the_status(api):
    binding_id = create(api).json()["id"]

    off = api.post(f"/api/bridges/bindings/{binding_id}/disable")
    status = api.get(f"/api/bridges/bindings/{binding_id}/status").json()
    on = api.post(f"/api/bridges/bindings/{binding_id}/enable")

    assert off.json()["enabled"] is False and status["state"] == "disabled"
    assert on.json()["enabled"] is True and on.json()["status"]["state"] == "ok"


def test_a_revoked_token_shows_a_reason_and_new_credentials_clear_it(api):
    binding_id = create(api).json()["id"]
    services.binding_report_revoked(binding_id=binding_id, code="token_revoked",
                                    reason="Telegram refused the bot's token.")

    status = api.get(f"/api/bridges/bindings/{binding_id}/status").json()
    fixed = api.patch(f"/api/bridges/bindings/{binding_id}", {"credentials": {"token": TOKEN + "2"},
                                                              "enabled": True}, format="json").json()

    assert status["enabled"] is False and status["state"] == "revoked"
    assert status["reason"] == "Telegram refused the bot's token."
    assert fixed["enabled"] is True and fixed["status"]["state"] == "ok"


def test_a_deleted_binding_is_gone(api):
    binding_id = create(api).json()["id"]

    assert api.delete(f"/api/bridges/bindings/{binding_id}").status_code == 204
    assert api.get(f"/api/bridges/bindings/{binding_id}").status_code == 404


def test_webhook_and_events_bindings_show_the_address_to_give_the_platform(api, settings):
    settings.PUBLIC_URL = "https://memory.example.org"
    webhook = create(api, mode="webhook").json()
    events = create(api, platform="slack", mode="http",
                    credentials={"bot_token": "xoxb-1234", "signing_secret": "abcdefgh12"}).json()

    assert webhook["endpoint"] == f"https://memory.example.org/bridges/telegram/{webhook['id']}/webhook"
    assert events["endpoint"] == f"https://memory.example.org/bridges/slack/{events['id']}/events"


def _pending_sender(binding_id: int, external_id: str = "42", display: str = "Carol"):
    sender = services.sender_seen(binding_id=binding_id, external_id=external_id, display=display)
    return sender, services.pairing_offer(sender=sender)


def test_the_owner_approves_a_pairing_code_and_grants_confirming_from_the_chat(api):
    binding_id = create(api).json()["id"]
    sender, offer = _pending_sender(binding_id)

    approved = api.post(f"/api/bridges/bindings/{binding_id}/pairings/approve", {"code": offer.code.lower()},
                        format="json")
    granted = api.patch(f"/api/bridges/senders/{sender.pk}", {"can_confirm": True, "name": "Aunt Carol"},
                        format="json")

    assert approved.status_code == 200 and approved.json()["status"] == "paired"
    assert granted.json()["can_confirm"] is True and granted.json()["label"] == "Aunt Carol"
    senders = api.get(f"/api/bridges/bindings/{binding_id}/senders").json()["senders"]
    assert [(s["label"], s["paired"], s["can_confirm"]) for s in senders] == [("Aunt Carol", True, True)]


def test_an_unpaired_sender_cannot_be_given_the_permission(api):
    binding_id = create(api).json()["id"]
    sender, _ = _pending_sender(binding_id)

    response = api.patch(f"/api/bridges/senders/{sender.pk}", {"can_confirm": True}, format="json")

    assert response.status_code == 409 and response.json()["error"]["code"] == "sender_not_paired"


def test_unpairing_takes_the_permission_away(api):
    binding_id = create(api).json()["id"]
    sender, offer = _pending_sender(binding_id)
    api.post(f"/api/bridges/bindings/{binding_id}/pairings/approve", {"code": offer.code, "can_confirm": True},
             format="json")

    unpaired = api.post(f"/api/bridges/senders/{sender.pk}/unpair").json()

    assert unpaired["paired"] is False and unpaired["can_confirm"] is False


def test_a_pairing_code_expires_after_an_hour(api):
    binding_id = create(api).json()["id"]
    _, offer = _pending_sender(binding_id)

    with time_machine.travel(timezone.now() + timedelta(minutes=61)):
        late = api.post(f"/api/bridges/bindings/{binding_id}/pairings/approve", {"code": offer.code},
                        format="json")
        listed = api.get(f"/api/bridges/bindings/{binding_id}/pairings").json()["pairings"]

    assert late.status_code == 410 and late.json()["error"]["code"] == "pairing_expired"
    assert listed == []


def test_an_unknown_code_is_a_404(api):
    binding_id = create(api).json()["id"]

    response = api.post(f"/api/bridges/bindings/{binding_id}/pairings/approve", {"code": "ZZZZZZ"}, format="json")

    assert response.status_code == 404


def test_only_a_few_pairing_requests_wait_per_binding(api):
    binding_id = create(api).json()["id"]
    offers = [_pending_sender(binding_id, external_id=str(n), display=f"S{n}")[1]
              for n in range(services.MAX_PENDING_PAIRINGS + 1)]

    assert all(o.code for o in offers[:-1]) and offers[-1].code is None
    assert len(api.get(f"/api/bridges/bindings/{binding_id}/pairings").json()["pairings"]) == \
        services.MAX_PENDING_PAIRINGS


def test_a_denied_sender_is_blocked(api):
    binding_id = create(api).json()["id"]
    _pending_sender(binding_id)
    [pending] = api.get(f"/api/bridges/bindings/{binding_id}/pairings").json()["pairings"]

    denied = api.post(f"/api/bridges/bindings/{binding_id}/pairings/{pending['id']}/deny")

    assert denied.status_code == 200 and denied.json()["status"] == "blocked"
    assert api.get(f"/api/bridges/bindings/{binding_id}/pairings").json()["pairings"] == []


def test_a_denied_sender_is_unblocked_and_one_who_is_not_blocked_is_a_conflict(api):
    binding_id = create(api).json()["id"]
    sender, _ = _pending_sender(binding_id)
    [pending] = api.get(f"/api/bridges/bindings/{binding_id}/pairings").json()["pairings"]
    api.post(f"/api/bridges/bindings/{binding_id}/pairings/{pending['id']}/deny")

    unblocked = api.post(f"/api/bridges/senders/{sender.pk}/unblock")
    again = api.post(f"/api/bridges/senders/{sender.pk}/unblock")

    assert unblocked.status_code == 200 and unblocked.json()["status"] == "unpaired"
    assert again.status_code == 409 and again.json()["error"]["code"] == "sender_not_blocked"


def test_an_outsider_has_no_access_to_alices_bots(api, outsider_api):
    binding_id = create(api).json()["id"]
    sender, offer = _pending_sender(binding_id)

    assert outsider_api.get("/api/bridges/bindings").json()["bindings"] == []
    for method, url, body in [
        ("get", f"/api/bridges/bindings/{binding_id}", None),
        ("patch", f"/api/bridges/bindings/{binding_id}", {"name": "mine"}),
        ("delete", f"/api/bridges/bindings/{binding_id}", None),
        ("post", f"/api/bridges/bindings/{binding_id}/disable", None),
        ("get", f"/api/bridges/bindings/{binding_id}/status", None),
        ("get", f"/api/bridges/bindings/{binding_id}/senders", None),
        ("get", f"/api/bridges/bindings/{binding_id}/conversations", None),
        ("get", f"/api/bridges/bindings/{binding_id}/pairings", None),
        ("post", f"/api/bridges/bindings/{binding_id}/pairings/approve", {"code": offer.code}),
        ("get", f"/api/bridges/senders/{sender.pk}", None),
        ("patch", f"/api/bridges/senders/{sender.pk}", {"can_confirm": True}),
        ("post", f"/api/bridges/senders/{sender.pk}/unpair", None),
        ("post", f"/api/bridges/senders/{sender.pk}/unblock", None),
    ]:
        response = getattr(outsider_api, method)(url, body, format="json")
        assert response.status_code == 404, (method, url)
    assert Binding.objects.get(pk=binding_id).enabled is True


def test_the_api_needs_a_login(anon_api):
    assert anon_api.get("/api/bridges/bindings").status_code == 401


def test_a_webhook_bot_on_an_http_public_url_is_told_the_platform_cannot_call_it(api, client, owner, settings):
    settings.PUBLIC_URL = "http://127.0.0.1:8741"  # the default's kind: README says Telegram and Slack need HTTPS
    webhook = create(api, mode="webhook").json()
    said = (f"Telegram cannot call http://127.0.0.1:8741/bridges/telegram/{webhook['id']}/webhook: it calls only a "
            "public https:// address. Set LOCALAI_MEMORY_PUBLIC_URL to the https address people reach this server "
            "at, then restart it.")
    assert webhook["endpoint_warning"] == said
    client.force_login(owner)
    assert said in client.get("/bridges/").content.decode()
    settings.PUBLIC_URL = "https://memory.example.org"
    assert api.get(f"/api/bridges/bindings/{webhook['id']}").json()["endpoint_warning"] is None
