from __future__ import annotations

from django.urls import path

from . import api, proposals_api

urlpatterns = [
    path("api/chats/memory", api.MemorySettingsApi.as_view(), name="memory-settings"),
    path("api/chats/memory/export", api.ExportApi.as_view(), name="memory-export"),
    path("api/chats/memory/forget", api.ForgetApi.as_view(), name="memory-forget"),
    path("api/chats/memory/addon-forgets", api.AddonForgetsApi.as_view(), name="memory-addon-forgets"),
    path("api/chats/memory/addon-forgets/<int:request_id>/ask", api.AddonForgetAskApi.as_view(),
         name="memory-addon-forget-ask"),
    path("api/chats/memory/notes", api.NotesApi.as_view(), name="memory-notes"),
    path("api/chats/memory/profile", api.ProfileApi.as_view(), name="memory-profile"),
    path("api/chats/providers", api.ProvidersApi.as_view(), name="providers"),
    path("api/chats/providers/<str:slot>", api.ProviderPickApi.as_view(), name="providers-pick"),
    # The proposals inbox (memory.proposals_api).
    path("api/chats/memory/proposals", proposals_api.ProposalsApi.as_view(), name="proposals"),
    path("api/chats/memory/proposals/<int:proposal_id>", proposals_api.ProposalApi.as_view(), name="proposal"),
    path("api/chats/memory/proposals/<int:proposal_id>/confirm", proposals_api.ProposalConfirmApi.as_view(),
         name="proposal-confirm"),
    path("api/chats/memory/proposals/<int:proposal_id>/reject", proposals_api.ProposalRejectApi.as_view(),
         name="proposal-reject"),
]
