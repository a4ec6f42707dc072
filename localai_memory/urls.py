"""Every route of the app: each app's urls plus the schema, docs and admin."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from localai_memory.accounts.views import admin_login, admin_password_change

urlpatterns = [
    # before the admin's own: they count password tries as /login/ does
    path("admin/login/", admin_login),
    path("admin/password_change/", admin_password_change),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("", include("localai_memory.accounts.urls")),
    path("", include("localai_memory.notes.urls")),
    path("", include("localai_memory.memory.urls")),
    path("", include("localai_memory.agents.urls")),
    path("", include("localai_memory.chats.urls")),
    path("", include("bridges.urls")),
    path("", include("localai_memory.growth.urls")),
    path("", include("localai_memory.recall.urls")),
    path("", include("localai_memory.mcpserver.urls")),
    path("", include("localai_memory.web.urls")),
]

handler400 = "localai_memory.core.views.bad_request"
handler404 = "localai_memory.core.views.not_found"
handler500 = "localai_memory.core.views.server_error"
