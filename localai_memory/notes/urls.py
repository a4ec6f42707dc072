from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/files", api.FilesApi.as_view(), name="files"),
    path("api/files/content", api.FileContentApi.as_view(), name="files-content"),
    path("api/files/history", api.FileHistoryApi.as_view(), name="files-history"),
    path("api/files/history/restore", api.FileRestoreVersionApi.as_view(), name="files-restore-version"),
    path("api/files/trash", api.TrashApi.as_view(), name="files-trash"),
    path("api/files/trash/<int:entry_id>/restore", api.TrashRestoreApi.as_view(), name="files-trash-restore"),
    path("api/chats/changes/audit", api.AuditApi.as_view(), name="changes-audit"),
    path("api/chats/changes/<int:change_id>/undo", api.UndoApi.as_view(), name="changes-undo"),
]
