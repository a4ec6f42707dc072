"""Token and registration endpoints."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from localai_memory.core.api import ApiView, StrictCharField, validated
from localai_memory.core.errors import ApplicationError, Forbidden

from .services import token_create, user_register
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
