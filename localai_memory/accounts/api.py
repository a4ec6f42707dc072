"""Token and registration endpoints, and a person's own tokens: list them, revoke one."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from localai_memory.core.api import ApiView, StrictCharField, validated
from localai_memory.core.errors import ApplicationError, Forbidden

from .models import ApiToken
from .selectors import access_token, token_list
from .services import token_create, token_revoke, user_register
from .throttling import AuthThrottle


class CredentialsSerializer(serializers.Serializer):
    username = StrictCharField(max_length=150)
    password = StrictCharField(max_length=256, trim_whitespace=False)


class TokenOutputSerializer(serializers.Serializer):
    token = serializers.CharField()


class TokenApi(ApiView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [AuthThrottle]

    @extend_schema(request=CredentialsSerializer, responses={200: TokenOutputSerializer}, auth=[])
    def post(self, request):
        user = authenticate(request, **validated(CredentialsSerializer, request.data))
        if user is None:
            raise ApplicationError("Wrong username or password.", code="invalid_credentials", status=400)
        return Response({"token": token_create(user=user)})


class RegisterApi(ApiView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [AuthThrottle]

    @extend_schema(request=CredentialsSerializer, responses={201: TokenOutputSerializer}, auth=[])
    def post(self, request):
        if not settings.OPEN_SIGNUP:
            raise Forbidden("Sign-up is closed on this server.", code="signup_closed")
        user = user_register(**validated(CredentialsSerializer, request.data))
        return Response({"token": token_create(user=user)}, status=201)


class TokenListOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's first characters, to tell tokens apart (the key itself "
                                             "is never shown again).")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="null: never used.")
    current = serializers.BooleanField(help_text="This is the token making the call.")


class TokensOutput(serializers.Serializer):
    tokens = TokenListOutput(many=True)


TOKEN_ID = OpenApiParameter("token_id", OpenApiTypes.INT, OpenApiParameter.PATH)


class TokenListApi(ApiView):
    @extend_schema(operation_id="auth_tokens_list", responses={200: TokensOutput})
    def get(self, request):
        """Your API tokens, newest first; ``current`` marks the one this call is made with (none for a session)."""
        calling = request.auth if isinstance(request.auth, ApiToken) else None
        tokens = []
        for token in token_list(user_id=request.user.pk):
            current = calling is not None and token.pk == calling.pk
            # the call's own use is recorded after the response: show it already
            last_used_at = calling.last_used_at if current and calling is not None else token.last_used_at
            # Times as every other answer writes them (``isoformat``: ``+00:00``); the serializer would end them
            # in ``Z``. TokensOutput stays the schema.
            tokens.append({"id": token.pk, "name": token.name, "prefix": token.prefix,
                           "created_at": token.created_at.isoformat(),
                           "last_used_at": last_used_at.isoformat() if last_used_at else None, "current": current})
        return Response({"tokens": tokens})


class TokenDetailApi(ApiView):
    @extend_schema(operation_id="auth_tokens_revoke", parameters=[TOKEN_ID], responses={204: None})
    def delete(self, request, token_id: int):
        """Revoke one of your tokens: the next call with it is a 401 (revoking the one you call with is allowed)."""
        token_revoke(token=access_token(request.user, token_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
