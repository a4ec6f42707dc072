"""Home: the chats list for someone who has chats, otherwise the Memory tab; the settings entry."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from localai_memory.chats.selectors import chat_list

from .common import AuthenticatedHttpRequest


@login_required
@require_GET
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    if chat_list(owner_id=request.user.pk).exists():
        return redirect("/chats/")
    return redirect("/settings/memory/")


@login_required
@require_GET
def settings_home(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Your settings: Memory is its only tab so far."""
    return redirect("/settings/memory/")
