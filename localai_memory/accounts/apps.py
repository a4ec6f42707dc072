from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_save


class AccountsConfig(AppConfig):
    name = "localai_memory.accounts"
    label = "accounts"

    def ready(self) -> None:
        from . import services

        # A password set outside our services (manage.py changepassword, a shell) revokes the API tokens too.
        post_save.connect(services.on_user_saved, sender=settings.AUTH_USER_MODEL,
                          dispatch_uid="accounts.services.on_user_saved")
