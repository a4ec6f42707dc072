"""The Files API and the audit of changes: thin views over notes.services / notes.selectors."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from localai_memory.core.api import (
    ApiView,
    StrictCharField,
    StrictIntegerField,
    bool_param,
    int_param,
    one_param,
    query_param,
    validated,
)
from localai_memory.core.errors import InvalidInput

from . import selectors, services
from .models import ChangeSet, FileVersion, NoteFile, TrashEntry

PATH_PARAM = OpenApiParameter("path", OpenApiTypes.STR, OpenApiParameter.QUERY, required=True,
                              description="A memory path such as Memory/index.md")


def file_json(note: NoteFile) -> dict:
    return {"path": note.path, "content": note.content, "version": note.version,
            "updated_at": note.updated_at.isoformat()}


def change_json(change: ChangeSet) -> dict:
    reverted = next(iter(change.reverted_by.all()), None)
    return {
        "id": change.pk,
        "created_at": change.created_at.isoformat(),
        "source": change.source,
        "summary": change.summary,
        "actor": change.actor,
        "automatic": change.automatic,
        "undo_until": change.undo_until.isoformat() if change.undo_until else None,
        "chat_id": change.chat_id,
        "proposal_id": change.proposal_id,
        "reverts": change.reverts_id,
        "undone_by": reverted.pk if reverted else None,
        # false for a note handed to a memory add-on (source addon): the add-on keeps it, Undo refuses
        "undoable": change.source != ChangeSet.Source.ADDON,
        "files": [{"path": f.path, "before": f.before, "after": f.after, "before_version": f.before_version,
                   "after_version": f.after_version} for f in change.files.all()],
        # the importances it gave notes: {scope, topic, before, after}, null being the writer's default
        "importance": change.importance or [],
    }


def trash_json(entry: TrashEntry) -> dict:
    return {"id": entry.pk, "kind": entry.kind, "label": entry.label, "created_at": entry.created_at.isoformat(),
            "restored_at": entry.restored_at.isoformat() if entry.restored_at else None,
            "files": [{"path": f.path, "size": len(f.content.encode())} for f in entry.files.all()]}


def version_json(version: FileVersion) -> dict:
    return {"version": version.version, "content": version.content, "deleted": version.deleted,
            "created_at": version.created_at.isoformat(), "change_id": version.change_set_id,
            "source": version.change_set.source, "summary": version.change_set.summary}


class FileWriteInput(serializers.Serializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=False, max_length=64 * 1024)
    version = StrictIntegerField(required=False, allow_null=True, min_value=1)


class FileDeleteInput(serializers.Serializer):
    version = StrictIntegerField(required=False, allow_null=True, min_value=1)


class RestoreVersionInput(serializers.Serializer):
    path = StrictCharField(max_length=200)
    version = StrictIntegerField(min_value=1)


class FilesApi(ApiView):
    @extend_schema(parameters=[OpenApiParameter("path", OpenApiTypes.STR, OpenApiParameter.QUERY,
                                                description="A folder, default Memory")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """List the files under a folder."""
        folder = one_param(request, "path")
        files = selectors.file_list(owner_id=request.user.pk, folder=folder)
        return Response({"path": folder or "Memory", "files": [
            {"path": f.path, "version": f.version, "size": len(f.content.encode()),
             "updated_at": f.updated_at.isoformat()} for f in files]})


class FileContentApi(ApiView):
    @extend_schema(parameters=[PATH_PARAM], responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Read one file: its path, content and version."""
        note = selectors.access_file(owner_id=request.user.pk, path=query_param(request, "path"))
        return Response(file_json(note))

    @extend_schema(parameters=[PATH_PARAM], request=FileWriteInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request):
        """Write one file. Send the version you edited (leave it out only to create); a stale one is a 409."""
        from localai_memory.memory.selectors import file_folder_owned

        path = query_param(request, "path")
        data = validated(FileWriteInput, request.data)
        file_folder_owned(user_id=request.user.pk, path=path)
        change, note = services.file_write_read(owner_id=request.user.pk, path=path, content=data["content"],
                                                version=data.get("version"))
        return Response({**file_json(note), "change_id": change.pk})

    @extend_schema(parameters=[PATH_PARAM, OpenApiParameter("version", OpenApiTypes.INT, OpenApiParameter.QUERY)],
                   request=FileDeleteInput, responses={200: OpenApiTypes.OBJECT})
    def delete(self, request):
        """Move one file to the Trash. Send the version you saw (``?version=``, or ``{"version": …}`` in a
        JSON body) and a stale one is a 409 ``stale_version``; left out, the file goes as it is now."""
        version = int_param(request, "version")
        if request.data != {}:  # a body: only its version, and one that agrees with ?version=
            sent = validated(FileDeleteInput, request.data).get("version")
            if version is not None and sent is not None and sent != version:
                raise InvalidInput(f"?version={version} and the body's version {sent} differ: send one",
                                   code="invalid_version")
            version = version if version is not None else sent
        entry = services.file_delete(owner_id=request.user.pk, path=query_param(request, "path"), version=version)
        return Response({"trash": trash_json(entry)})


class FileHistoryApi(ApiView):
    @extend_schema(parameters=[PATH_PARAM], responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Every version of a file, newest first."""
        path = query_param(request, "path")
        versions = selectors.file_history(owner_id=request.user.pk, path=path)
        return Response({"path": path, "versions": [version_json(v) for v in versions]})


class FileRestoreVersionApi(ApiView):
    @extend_schema(request=RestoreVersionInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request):
        """Make an earlier version the current text (as a new version)."""
        from localai_memory.memory.selectors import file_folder_owned

        data = validated(RestoreVersionInput, request.data)
        file_folder_owned(user_id=request.user.pk, path=data["path"])
        change = services.version_restore_read(owner_id=request.user.pk, path=data["path"], version=data["version"])
        return Response({"change": change_json(change)})


class TrashApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """What is in the Trash (not yet restored)."""
        return Response({"entries": [trash_json(e) for e in selectors.trash_list(owner_id=request.user.pk)]})


class TrashRestoreApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, entry_id: int):
        """Put a Trash entry's files back where they were."""
        entry = selectors.access_trash(owner_id=request.user.pk, entry_id=entry_id)
        change = services.trash_restore(owner_id=request.user.pk, entry_id=entry.pk)
        return Response({"change": change_json(selectors.access_change(owner_id=request.user.pk, change_id=change.pk))})


class AuditApi(ApiView):
    @extend_schema(parameters=[OpenApiParameter("limit", OpenApiTypes.INT, OpenApiParameter.QUERY),
                               OpenApiParameter("automatic", OpenApiTypes.BOOL, OpenApiParameter.QUERY),
                               OpenApiParameter("before", OpenApiTypes.INT, OpenApiParameter.QUERY)],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Every change set, newest first (automatic notes included), ``limit`` at a time; ``next_before``
        (null on the last page) is the ``before`` that reads the page after this one. A ``before`` that is not
        one of your change sets is a 400 ``invalid_before``."""
        limit = int_param(request, "limit", default=100, max_value=500)
        before = int_param(request, "before")
        changes = selectors.change_list(owner_id=request.user.pk, before=before)
        automatic = bool_param(request, "automatic")
        if automatic is not None:
            changes = changes.filter(automatic=automatic)
        page = list(changes[:limit + 1])
        more = len(page) > limit
        page = page[:limit]
        return Response({"changes": [change_json(c) for c in page],
                         "next_before": page[-1].pk if more else None})


class UndoApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, change_id: int):
        """Restore the text every file had before this change (409 if a file changed since)."""
        change = selectors.access_change(owner_id=request.user.pk, change_id=change_id)
        undo = services.change_undo(owner_id=request.user.pk, change_id=change.pk)
        return Response({"change": change_json(selectors.access_change(owner_id=request.user.pk, change_id=undo.pk))})
