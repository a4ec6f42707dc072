"""The bridges API (``/api/bridges/…``): bindings, their conversations, senders and pairing requests.

Thin views over ``bridges.services`` / ``bridges.selectors``. Credentials are write-only: a binding's JSON
names the credentials that are stored (``credentials_set``) and never their values. Another user's binding,
sender, conversation or pairing request is a 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from localai_memory.core.api import (
    ApiView,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    validated,
)

from . import selectors, services
from .models import PLATFORM_MODES, Binding, Conversation, Mode, PairingRequest, Platform, Sender


def binding_json(binding: Binding) -> dict[str, Any]:
    endpoint = selectors.binding_endpoint(binding=binding)
    return {
        "id": binding.pk,
        "platform": binding.platform,
        "name": binding.name,
        "mode": binding.mode,
        "agent": binding.agent_id,
        "enabled": binding.enabled,
        "credentials_set": list(binding.credential_keys),
        "endpoint": endpoint,
        # an http:// or loopback endpoint is taken (a test, a proxy still to come) but said to be unreachable
        "endpoint_warning": selectors.endpoint_warning(binding=binding),
        "status": status_json(binding),
        "created_at": binding.created_at.isoformat(),
        "updated_at": binding.updated_at.isoformat(),
    }


def status_json(binding: Binding) -> dict[str, Any]:
    if not binding.enabled:
        state = "revoked" if binding.state == "revoked" else "disabled"
    else:
        state = binding.state
    return {
        "state": state,
        "code": binding.state_code or None,
        "reason": binding.state_reason or ("Turned off by you." if state == "disabled" else None),
        "since": binding.state_changed_at.isoformat() if binding.state_changed_at else None,
        "last_connected_at": binding.last_connected_at.isoformat() if binding.last_connected_at else None,
        "bot": binding.bot_identity or None,
    }


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.pk,
        "binding": conversation.binding_id,
        "platform_id": conversation.external_id,
        "kind": conversation.kind,
        "one_to_one": conversation.one_to_one,
        "title": conversation.title,
        "channel_key": conversation.channel_key,
        "notes": f"Memory/channels/{conversation.channel_key}/index.md",
        "chat": conversation.chat_id,
        "created_at": conversation.created_at.isoformat(),
        "last_message_at": conversation.last_message_at.isoformat() if conversation.last_message_at else None,
    }


def sender_json(sender: Sender) -> dict[str, Any]:
    return {
        "id": sender.pk,
        "binding": sender.binding_id,
        "platform_id": sender.external_id,
        "display": sender.display,
        "name": sender.name,
        "label": sender.label,
        "status": sender.status,
        "paired": sender.paired,
        "can_confirm": sender.can_confirm,
        "paired_at": sender.paired_at.isoformat() if sender.paired_at else None,
        "last_seen_at": sender.last_seen_at.isoformat() if sender.last_seen_at else None,
    }


def pairing_json(request: PairingRequest) -> dict[str, Any]:
    return {
        "id": request.pk,
        "sender": {"id": request.sender_id, "display": request.sender.display,
                   "platform_id": request.sender.external_id},
        "status": request.status,
        "created_at": request.created_at.isoformat(),
        "expires_at": request.expires_at.isoformat(),
    }


class BindingCreateInput(serializers.Serializer):
    platform = serializers.ChoiceField(choices=Platform.values)
    name = StrictCharField(max_length=100)
    mode = serializers.ChoiceField(choices=Mode.values, required=False)
    agent = StrictIntegerField(required=False, allow_null=True, min_value=1)
    enabled = StrictBooleanField(required=False)
    credentials = serializers.JSONField()


class BindingUpdateInput(serializers.Serializer):
    name = StrictCharField(max_length=100, required=False)
    mode = serializers.ChoiceField(choices=Mode.values, required=False)
    agent = StrictIntegerField(required=False, allow_null=True, min_value=1)
    enabled = StrictBooleanField(required=False)
    credentials = serializers.JSONField(required=False)


class SenderUpdateInput(serializers.Serializer):
    name = StrictCharField(max_length=100, required=False, allow_blank=True)
    can_confirm = StrictBooleanField(required=False)


class PairingApproveInput(serializers.Serializer):
    code = StrictCharField(max_length=20)
    can_confirm = StrictBooleanField(required=False)


class BindingsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Your bindings (credentials are never shown), and the modes each platform offers."""
        return Response({"bindings": [binding_json(b) for b in selectors.binding_list(owner_id=request.user.pk)],
                         "platforms": {p: list(m) for p, m in PLATFORM_MODES.items()}})

    @extend_schema(request=BindingCreateInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request):
        """Connect a bot: platform, name, credentials, optionally mode, agent and enabled."""
        data = validated(BindingCreateInput, request.data)
        binding = services.binding_create(owner_id=request.user.pk, platform=data["platform"], name=data["name"],
                                          credentials=data["credentials"], mode=data.get("mode"),
                                          agent_id=data.get("agent"), enabled=data.get("enabled", True))
        return Response(binding_json(binding), status=status.HTTP_201_CREATED)


class BindingApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, binding_id: int):
        """One binding."""
        return Response(binding_json(selectors.access_binding(request.user, binding_id)))

    @extend_schema(request=BindingUpdateInput, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request, binding_id: int):
        """Change a binding; a field left out stays. New credentials are merged into the stored ones."""
        binding = selectors.access_binding(request.user, binding_id)
        data = validated(BindingUpdateInput, request.data)
        fields = {name: data[name] for name in ("name", "mode", "enabled", "credentials") if name in data}
        if "agent" in data:
            fields["agent_id"] = data["agent"]
        return Response(binding_json(services.binding_update(binding=binding, **fields)))

    put = patch

    @extend_schema(responses={204: None})
    def delete(self, request, binding_id: int):
        """Disconnect the bot (its conversations' notes stay in Memory)."""
        services.binding_delete(binding=selectors.access_binding(request.user, binding_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class BindingEnableApi(ApiView):
    enabled = True

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, binding_id: int):
        """Turn the binding on (or off); runbridges follows within seconds."""
        binding = selectors.access_binding(request.user, binding_id)
        return Response(binding_json(services.binding_set_enabled(binding=binding, enabled=self.enabled)))


class BindingDisableApi(BindingEnableApi):
    enabled = False


class BindingStatusApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, binding_id: int):
        """Whether the bot works, and if not, why (e.g. the platform refused its token)."""
        binding = selectors.access_binding(request.user, binding_id)
        return Response({"enabled": binding.enabled, **status_json(binding)})


class ConversationsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, binding_id: int):
        """The binding's conversations and where their notes are."""
        binding = selectors.access_binding(request.user, binding_id)
        return Response({"conversations": [conversation_json(c)
                                           for c in selectors.conversation_list(binding=binding)]})


class ConversationApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, conversation_id: int):
        """One conversation."""
        return Response(conversation_json(selectors.access_conversation(request.user, conversation_id)))


class SendersApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, binding_id: int):
        """Everybody who wrote to the bot, paired or not."""
        binding = selectors.access_binding(request.user, binding_id)
        return Response({"senders": [sender_json(s) for s in selectors.sender_list(binding=binding)]})


class SenderApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, sender_id: int):
        """One sender."""
        return Response(sender_json(selectors.access_sender(request.user, sender_id)))

    @extend_schema(request=SenderUpdateInput, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request, sender_id: int):
        """Rename a sender, or grant/revoke "Confirm changes from the chat" (``can_confirm``)."""
        sender = selectors.access_sender(request.user, sender_id)
        data = validated(SenderUpdateInput, request.data)
        return Response(sender_json(services.sender_update(sender=sender, **data)))

    put = patch

    @extend_schema(responses={204: None})
    def delete(self, request, sender_id: int):
        """Forget a sender (a denied one may then ask to pair again)."""
        services.sender_delete(sender=selectors.access_sender(request.user, sender_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class SenderUnpairApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, sender_id: int):
        """Unpair a sender: their messages stop reaching the model."""
        sender = selectors.access_sender(request.user, sender_id)
        return Response(sender_json(services.sender_unpair(sender=sender)))


class SenderUnblockApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, sender_id: int):
        """Unblock a sender whose pairing was denied: writing to the bot again gets them a new code (409 when
        they are not blocked)."""
        sender = selectors.access_sender(request.user, sender_id)
        return Response(sender_json(services.sender_unblock(sender=sender)))


class PairingsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, binding_id: int):
        """Pairing requests that wait for you (the code itself is what the sender tells you)."""
        binding = selectors.access_binding(request.user, binding_id)
        return Response({"pairings": [pairing_json(p) for p in selectors.pairing_list(binding=binding)]})


class PairingApproveApi(ApiView):
    @extend_schema(request=PairingApproveInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, binding_id: int):
        """Approve the pairing code a sender got; optionally let them confirm changes from the chat."""
        binding = selectors.access_binding(request.user, binding_id)
        data = validated(PairingApproveInput, request.data)
        sender = services.pairing_approve(binding=binding, code=data["code"],
                                          can_confirm=data.get("can_confirm", False))
        return Response(sender_json(sender))


class PairingDenyApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, binding_id: int, pairing_id: int):
        """Deny a pairing request: the bot then ignores that sender."""
        binding = selectors.access_binding(request.user, binding_id)
        pairing = selectors.access_pairing(request.user, binding, pairing_id)
        return Response(sender_json(services.pairing_deny(request=pairing)))
