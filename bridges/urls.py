"""Routes of the bridges: the owner's API under /api/bridges/, the platforms' endpoints under /bridges/."""

from __future__ import annotations

from django.urls import path

from . import api, views

urlpatterns = [
    path("api/bridges/bindings", api.BindingsApi.as_view(), name="bridges-bindings"),
    path("api/bridges/bindings/<int:binding_id>", api.BindingApi.as_view(), name="bridges-binding"),
    path("api/bridges/bindings/<int:binding_id>/enable", api.BindingEnableApi.as_view(), name="bridges-enable"),
    path("api/bridges/bindings/<int:binding_id>/disable", api.BindingDisableApi.as_view(), name="bridges-disable"),
    path("api/bridges/bindings/<int:binding_id>/status", api.BindingStatusApi.as_view(), name="bridges-status"),
    path("api/bridges/bindings/<int:binding_id>/conversations", api.ConversationsApi.as_view(),
         name="bridges-conversations"),
    path("api/bridges/bindings/<int:binding_id>/senders", api.SendersApi.as_view(), name="bridges-senders"),
    path("api/bridges/bindings/<int:binding_id>/pairings", api.PairingsApi.as_view(), name="bridges-pairings"),
    path("api/bridges/bindings/<int:binding_id>/pairings/approve", api.PairingApproveApi.as_view(),
         name="bridges-pairing-approve"),
    path("api/bridges/bindings/<int:binding_id>/pairings/<int:pairing_id>/deny", api.PairingDenyApi.as_view(),
         name="bridges-pairing-deny"),
    path("api/bridges/conversations/<int:conversation_id>", api.ConversationApi.as_view(),
         name="bridges-conversation"),
    path("api/bridges/senders/<int:sender_id>", api.SenderApi.as_view(), name="bridges-sender"),
    path("api/bridges/senders/<int:sender_id>/unpair", api.SenderUnpairApi.as_view(), name="bridges-sender-unpair"),
    path("api/bridges/senders/<int:sender_id>/unblock", api.SenderUnblockApi.as_view(),
         name="bridges-sender-unblock"),
    path("bridges/telegram/<int:binding_id>/webhook", views.telegram_webhook, name="bridges-telegram-webhook"),
    path("bridges/slack/<int:binding_id>/events", views.slack_events, name="bridges-slack-events"),
]
