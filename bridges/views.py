"""The platforms' endpoints: Telegram's webhook and Slack's Events API (events and button clicks).

Thin: find the binding, check the platform's proof (Telegram's secret token header, Slack's signature by
Bolt), hand the update to the adapter. An unknown, disabled or differently configured binding is a 404; a
wrong secret or signature is refused before anything is read into the database. A bot of a suspended account
(its owner unticked "Active" in the admin) is accepted and ignored: Telegram would otherwise send the update
again and again; the bot core (``core.handle``) likewise answers nothing for a Slack one.
"""

from __future__ import annotations

import hmac
import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from localai_memory.core.parsers import json_loads

from .crypto import CredentialsUnreadable, decrypt
from .models import Binding, Mode, Platform

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def _binding(binding_id: int, platform: str, mode: str) -> Binding | None:
    return (Binding.objects.select_related("owner")
            .filter(pk=binding_id, platform=platform, mode=mode, enabled=True).first())


@csrf_exempt
@require_POST
def telegram_webhook(request: HttpRequest, binding_id: int) -> HttpResponse:
    """Telegram posts each update here; ``X-Telegram-Bot-Api-Secret-Token`` must be the binding's secret."""
    binding = _binding(binding_id, Platform.TELEGRAM, Mode.WEBHOOK)
    if binding is None:
        return _error(404, "not_found", "No such webhook.")
    try:
        credentials = decrypt(binding.credentials)
    except CredentialsUnreadable as exc:
        return _error(503, exc.code, exc.message)
    given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
    if not hmac.compare_digest(given.encode(), credentials.get("webhook_secret", "").encode()) or not given:
        return _error(403, "bad_secret", "The secret token is missing or wrong.")
    if not binding.owner.is_active:
        return JsonResponse({"ok": True})  # taken, so Telegram does not retry it; the account is suspended
    if len(request.body) > MAX_BODY_BYTES:
        return _error(413, "too_large", "The update is too large.")
    try:
        payload = json_loads(request.body)
    except ValueError:
        return _error(400, "invalid_json", "The body is not JSON.")
    if not isinstance(payload, dict) or not isinstance(payload.get("update_id"), int):
        return _error(400, "invalid_update", "The body is not a Telegram update.")
    from .telegram.adapter import process_webhook_update

    process_webhook_update(binding.pk, credentials["token"], payload)
    return JsonResponse({"ok": True})


@csrf_exempt
def slack_events(request: HttpRequest, binding_id: int) -> HttpResponse:
    """Slack's Events API and interactivity Request URL; Bolt checks the signature and answers at once."""
    if request.method != "POST":
        return _error(405, "method_not_allowed", "Slack posts here.")
    binding = _binding(binding_id, Platform.SLACK, Mode.HTTP)
    if binding is None:
        return _error(404, "not_found", "No such endpoint.")
    try:
        credentials = decrypt(binding.credentials)
    except CredentialsUnreadable as exc:
        return _error(503, exc.code, exc.message)
    from .slack.adapter import http_handler

    handler = http_handler(binding.pk, binding.updated_at.isoformat(), credentials)
    return handler.handle(request)
