"""Token and registration endpoints."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from localai_memory.core.errors import ApplicationError, Forbidden

from .services import token_create, user_register


class AuthThrottle(AnonRateThrottle):
    scope = "auth"


class CredentialsSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=256, trim_whitespace=False)


class TokenOutputSerializer(serializers.Serializer):
    token = serializers.CharField()


class TokenApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [AuthThrottle]

    @extend_schema(request=CredentialsSerializer, responses={200: TokenOutputSerializer}, auth=[])
    def post(self, request):
        data = CredentialsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request, **data.validated_data)
        if user is None:
            raise ApplicationError("Wrong username or password.", code="invalid_credentials", status=400)
        return Response({"token": token_create(user=user)})


class RegisterApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [AuthThrottle]

    @extend_schema(request=CredentialsSerializer, responses={201: TokenOutputSerializer}, auth=[])
    def post(self, request):
        if not settings.OPEN_SIGNUP:
            raise Forbidden("Sign-up is closed on this server.", code="signup_closed")
        data = CredentialsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = user_register(**data.validated_data)
        return Response({"token": token_create(user=user)}, status=201)
