"""The web app: server-rendered pages over the services (no front-end build step) and the admin's title."""

from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "localai_memory.web"
    label = "web"
    verbose_name = "Web pages"

    def ready(self) -> None:
        from django.contrib import admin

        admin.site.site_header = "LocalAI Memory administration"
        admin.site.site_title = "LocalAI Memory admin"
        admin.site.index_title = "Users, settings, notes, proposals, agents, chats and bots"
