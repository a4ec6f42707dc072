"""Bridges: the bots that carry your chats into Telegram, Slack and Discord.

Per binding: its state and switch, its settings (name, mode, agent, credentials) to edit, the address the
platform calls when it calls one, the conversations it carries (with their notes and chat), the senders with
their pairing state, the permission "Confirm changes from the chat" and a way to unblock one denied, and the
pairing codes that wait for you. Credentials are write-only: the page never shows them back, and a credential
field left blank keeps the stored one. Every change goes through ``bridges.services``, checked as the API
checks it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from bridges import selectors as bridge_selectors
from bridges import services as bridge_services
from bridges.models import PLATFORM_MODES, Mode, Platform
from localai_memory.agents import selectors as agent_selectors
from localai_memory.core.errors import ApplicationError

from .common import AuthenticatedHttpRequest, int_or_404, not_found_as_404, page

BRIDGES = "/bridges/"
CREDENTIAL_LABELS = {
    "token": "Bot token (Telegram, Discord)",
    "webhook_secret": "Telegram webhook secret (optional)",
    "bot_token": "Slack bot token (xoxb-…)",
    "signing_secret": "Slack signing secret (Events API only)",
    "app_token": "Slack app-level token (xapp-…, Socket Mode only)",
}


#: The credentials of each platform as its Edit form names them.
EDIT_CREDENTIAL_LABELS: dict[str, dict[str, str]] = {
    Platform.TELEGRAM: {"token": "Bot token", "webhook_secret": "Webhook secret"},
    Platform.SLACK: {"bot_token": "Bot token (xoxb-…)", "app_token": "App-level token (xapp-…, Socket Mode)",
                     "signing_secret": "Signing secret (Events API)"},
    Platform.DISCORD: {"token": "Bot token"},
}


@login_required
@require_GET
def bridges_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    bindings = []
    for binding in bridge_selectors.binding_list(owner_id=request.user.pk):
        bindings.append({
            "binding": binding,
            "conversations": list(bridge_selectors.conversation_list(binding=binding)[:100]),
            "senders": list(bridge_selectors.sender_list(binding=binding)[:200]),
            "pairings": list(bridge_selectors.pairing_list(binding=binding)),
            "endpoint": bridge_selectors.binding_endpoint(binding=binding),
            "endpoint_warning": bridge_selectors.endpoint_warning(binding=binding),
            "modes": [(m, Mode(m).label) for m in PLATFORM_MODES[binding.platform]],
            "credential_fields": [(key, label, key in binding.credential_keys or key == "webhook_secret")
                                  for key, label in EDIT_CREDENTIAL_LABELS[binding.platform].items()],
        })
    platforms = [(p.value, p.label, [(m, Mode(m).label) for m in PLATFORM_MODES[p.value]]) for p in Platform]
    credential_fields = [(key, CREDENTIAL_LABELS[key]) for key in
                         ("token", "webhook_secret", "bot_token", "app_token", "signing_secret")]
    return page(request, "web/bridges.html", {
        "bindings": bindings, "platforms": platforms, "credential_fields": credential_fields,
        "agents": list(agent_selectors.agent_list(owner_id=request.user.pk)),
    }, section="bridges")


def _credentials(request: AuthenticatedHttpRequest, platform: str) -> dict[str, Any]:
    keys = bridge_services.CREDENTIAL_KEYS.get(platform, ())
    return {key: request.POST.get(key, "").strip() for key in keys if request.POST.get(key, "").strip()}


@login_required
@not_found_as_404
@require_POST
def binding_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    platform = request.POST.get("platform", "")
    raw_agent = request.POST.get("agent", "")
    try:
        binding = bridge_services.binding_create(
            owner_id=request.user.pk, platform=platform, name=request.POST.get("name", ""),
            credentials=_credentials(request, platform), mode=request.POST.get("mode") or None,
            agent_id=int_or_404(raw_agent) if raw_agent else None)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Connected the bot “{binding.name}”. It starts within a minute.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def binding_edit(request: AuthenticatedHttpRequest, binding_id: int) -> HttpResponse:
    """Name, mode, agent and credentials (a blank credential keeps the stored one). Only what changed is
    passed on: storing the credentials again would reconnect the bot for nothing."""
    binding = bridge_selectors.access_binding(request.user, binding_id)
    changes: dict[str, Any] = {}
    name = request.POST.get("name", "")
    if name.strip() != binding.name:
        changes["name"] = name
    mode = request.POST.get("mode") or binding.mode
    if mode != binding.mode:
        changes["mode"] = mode
    raw_agent = request.POST.get("agent", "")
    agent_id = int_or_404(raw_agent) if raw_agent else None
    if agent_id != binding.agent_id:
        changes["agent_id"] = agent_id
    credentials = _credentials(request, binding.platform)
    if credentials:
        changes["credentials"] = credentials
    if not changes:
        messages.info(request, f"Nothing to change in “{binding.name}”.")
        return redirect(BRIDGES)
    try:
        binding = bridge_services.binding_update(binding=binding, **changes)
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return redirect(BRIDGES)
    said = f"Saved “{binding.name}”."
    if "credentials" in changes or "mode" in changes:
        said += " It reconnects within a minute." if binding.enabled else " Turn it on to start it."
    messages.success(request, said)
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def binding_switch(request: AuthenticatedHttpRequest, binding_id: int) -> HttpResponse:
    binding = bridge_selectors.access_binding(request.user, binding_id)
    enabled = request.POST.get("enabled") == "on"
    binding = bridge_services.binding_set_enabled(binding=binding, enabled=enabled)
    messages.success(request, f"“{binding.name}” is {'on' if binding.enabled else 'off'}.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def binding_delete(request: AuthenticatedHttpRequest, binding_id: int) -> HttpResponse:
    binding = bridge_selectors.access_binding(request.user, binding_id)
    bridge_services.binding_delete(binding=binding)
    messages.success(request, f"Disconnected “{binding.name}”. Its conversations' notes stay in Files.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def pairing_approve(request: AuthenticatedHttpRequest, binding_id: int, pairing_id: int) -> HttpResponse:
    binding = bridge_selectors.access_binding(request.user, binding_id)
    pairing = bridge_selectors.access_pairing(request.user, binding, pairing_id)
    try:
        sender = bridge_services.pairing_approve(binding=binding, code=pairing.code,
                                                 can_confirm=request.POST.get("can_confirm") == "on")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Paired {sender.label}.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def pairing_deny(request: AuthenticatedHttpRequest, binding_id: int, pairing_id: int) -> HttpResponse:
    binding = bridge_selectors.access_binding(request.user, binding_id)
    pairing = bridge_selectors.access_pairing(request.user, binding, pairing_id)
    try:
        sender = bridge_services.pairing_deny(request=pairing)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Denied {sender.label}; the bot ignores them now.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def sender_permission(request: AuthenticatedHttpRequest, sender_id: int) -> HttpResponse:
    sender = bridge_selectors.access_sender(request.user, sender_id)
    try:
        sender = bridge_services.sender_update(sender=sender, can_confirm=request.POST.get("can_confirm") == "on")
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{sender.label} {'can' if sender.can_confirm else 'cannot'} confirm changes "
                                  "from the chat now.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def sender_unpair(request: AuthenticatedHttpRequest, sender_id: int) -> HttpResponse:
    sender = bridge_selectors.access_sender(request.user, sender_id)
    sender = bridge_services.sender_unpair(sender=sender)
    messages.success(request, f"Unpaired {sender.label}.")
    return redirect(BRIDGES)


@login_required
@not_found_as_404
@require_POST
def sender_unblock(request: AuthenticatedHttpRequest, sender_id: int) -> HttpResponse:
    sender = bridge_selectors.access_sender(request.user, sender_id)
    try:
        sender = bridge_services.sender_unblock(sender=sender)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Unblocked {sender.label}: when they write to the bot again, they get a new "
                                  "pairing code.")
    return redirect(BRIDGES)
