from __future__ import annotations

from django.urls import path

from . import api, views

urlpatterns = [
    path("api/auth/token", api.TokenApi.as_view(), name="auth-token"),
    path("api/auth/register", api.RegisterApi.as_view(), name="auth-register"),
    path("api/auth/tokens", api.TokenListApi.as_view(), name="auth-tokens"),
    path("api/auth/tokens/<int:token_id>", api.TokenDetailApi.as_view(), name="auth-tokens-detail"),
    path("login/", views.MemoryLoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("register/", views.register_view, name="register"),
]
