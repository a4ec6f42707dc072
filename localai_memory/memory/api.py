"""Memory settings, providers, export, forget and the notes listing (spec: "The API")."""

from __future__ import annotations

from django.apps import apps
from django.db import transaction
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response

from localai_memory.core.api import (
    ApiView,
    NamedChoiceField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    one_param,
    validated,
)
from localai_memory.core.errors import Conflict, InvalidInput
from localai_memory.notes import selectors as notes_selectors
from localai_memory.notes.paths import IndexEntry, Scope, parse_index
from localai_memory.notes.services import (
    KEEP,
    UNCHECKED,
    importance_change,
    note_save,
    note_version_given,
)

from . import services
from .categories import CATEGORIES, Profile, ProfileNote, category_of, profile
from .models import AddonForgetRequest, MessagingSave, SaveMode
from .providers import addon_label, forget_summary, memory_providers
from .selectors import addon_forget_requests, memory_state, owned_scope


class SettingsInput(serializers.Serializer):
    enabled = StrictBooleanField(required=False)
    save_mode = NamedChoiceField(choices=SaveMode.values, required=False,
                                 help_text="auto: Save it and tell me; ask: Ask me first; always: Always confirm "
                                           "(every note waits for you); never: Never")
    messaging_save = NamedChoiceField(choices=MessagingSave.values, required=False)


class SettingsOutput(serializers.Serializer):
    enabled = serializers.BooleanField()
    enabled_set = serializers.BooleanField()
    save_mode = serializers.ChoiceField(choices=SaveMode.values)
    messaging_save = serializers.ChoiceField(choices=MessagingSave.values)
    save_mode_set = serializers.BooleanField()
    provider = serializers.CharField()
    available = serializers.BooleanField()


class ProviderInput(serializers.Serializer):
    provider = StrictCharField(max_length=100)


class ForgetInput(serializers.Serializer):
    confirm = StrictBooleanField()


#: What GET /api/chats/memory answers that PUT does not change (GET's ``unavailable`` explains a state).
READ_ONLY_SETTINGS = frozenset({"enabled_set", "save_mode_set", "provider", "available", "unavailable"})
READ_ONLY_SETTINGS_HELP = ("the provider is picked with PUT /api/chats/providers/memory; enabled_set, save_mode_set, "
                           "available and unavailable follow from the settings.")


class MemorySettingsApi(ApiView):
    @extend_schema(responses={200: SettingsOutput})
    def get(self, request):
        """The memory settings: on/off, save level, messaging row, provider."""
        return Response(memory_state(user_id=request.user.pk).as_api())

    @extend_schema(request=SettingsInput, responses={200: SettingsOutput})
    def put(self, request):
        """Change any of enabled, save_mode, messaging_save; a field left out stays as it is. A client may send
        back what GET gave it (read, changed, written back): the fields PUT does not change are taken when they
        say what is so now, and a 400 ``read_only_field`` says where to change one that differs."""
        body = request.data
        if isinstance(body, dict) and READ_ONLY_SETTINGS & set(body):
            now = memory_state(user_id=request.user.pk).as_api()
            differing = sorted(key for key in READ_ONLY_SETTINGS & set(body) if body[key] != now.get(key))
            if differing:
                raise InvalidInput(f"{', '.join(differing)} cannot be changed here: {READ_ONLY_SETTINGS_HELP}",
                                   code="read_only_field", details={"fields": differing})
            body = {key: value for key, value in body.items() if key not in READ_ONLY_SETTINGS}
        data = validated(SettingsInput, body)
        return Response(services.settings_update(user_id=request.user.pk, **data).as_api())


class ProvidersApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """The providers of each slot and which one serves now."""
        state = memory_state(user_id=request.user.pk)
        return Response({"slots": {"memory": {
            "current": state.provider,
            "chosen": state.provider_choice,
            "available": state.available,
            "providers": [p.as_dict() for p in memory_providers()],
        }}})


class ProviderPickApi(ApiView):
    @extend_schema(request=ProviderInput, responses={200: SettingsOutput})
    def put(self, request, slot: str):
        """Pick the provider of a slot (only ``memory`` exists)."""
        if slot != "memory":
            raise InvalidInput(f"unknown slot {slot!r}; the only slot is memory", code="unknown_slot")
        body = request.data
        elsewhere = sorted(set(body) & set(SettingsInput().fields)) if isinstance(body, dict) else []
        if elsewhere:  # the answer shows every setting; only the provider is picked here
            raise InvalidInput(f"{', '.join(elsewhere)} is set with PUT /api/chats/memory; this route picks only "
                               "the provider", code="unknown_field", details={"fields": elsewhere})
        data = validated(ProviderInput, body)
        return Response(services.provider_pick(user_id=request.user.pk, provider=data["provider"]).as_api())


class ExportApi(ApiView):
    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY})
    def get(self, request):
        """A zip of every Memory file (works while memory is off)."""
        body = services.memory_export_all(user_id=request.user.pk)
        response = HttpResponse(body, content_type="application/zip")
        response["Content-Disposition"] = 'attachment; filename="memory-export.zip"'
        return response


class ForgetApi(ApiView):
    @extend_schema(request=ForgetInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request):
        """Move every note to the Trash (restorable from Files). Needs {"confirm": true}."""
        data = validated(ForgetInput, request.data)
        if not data["confirm"]:
            raise InvalidInput("send {\"confirm\": true} to forget everything", code="confirm_required")
        entry, addons = services.memory_forget_all(user_id=request.user.pk)
        return Response({"trash_id": entry.pk if entry else None,
                         "files": entry.files.count() if entry else 0,
                         # every memory add-on you used, serving or not: forgot, or why not (null: none to ask)
                         "addon": forget_summary(addons),
                         "addons": [answer.as_dict() for answer in addons],
                         "message": "Your notes are in the Trash; restore them from Files." if entry
                         else "There were no notes to forget."})


def addon_forget_json(request: AddonForgetRequest) -> dict:
    return {"id": request.pk, "name": request.addon, "label": addon_label(request.addon),
            "namespace": request.namespace, "whose": request.whose, "status": request.answer,
            "created_at": request.created_at, "asked_at": request.asked_at}


class AddonForgetsApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """The memory add-ons that were to drop a deleted agent's notes and could not be asked (``not_running``)
        or failed (``failed``): they may still hold them. POST …/{id}/ask asks one again."""
        return Response({"addon_forgets": [addon_forget_json(r)
                                           for r in addon_forget_requests(owner_id=request.user.pk)]})


class AddonForgetAskApi(ApiView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, request_id: int):
        """Ask the add-on again to drop those notes: its answer (``{name, label, status, message}``, as Forget
        everything's ``addons``) and the request while it still waits (not running, failed again), else null."""
        answer, pending = services.addon_forget_again(owner_id=request.user.pk, request_id=request_id)
        return Response({"addon": answer.as_dict(),
                         "addon_forget": addon_forget_json(pending) if pending is not None else None})


def scope_listing(*, owner_id: int, with_details: bool = False) -> list[dict]:
    """Every scope with notes (and every live agent), with its index entries (each with its ``category``;
    ``with_details``: its topic file's text too) and topic files."""
    files = list(notes_selectors.file_list(owner_id=owner_id))
    live_agents: dict[str, str] = {}
    deleted_names: dict[str, str] = {}
    if apps.is_installed("localai_memory.agents"):
        from localai_memory.agents.selectors import agent_names, deleted_agent_names

        live_agents = agent_names(owner_id)
        deleted_names = deleted_agent_names(owner_id)
    by_root: dict[str, list] = {}
    for note in files:
        by_root.setdefault(note.path.rsplit("/", 1)[0], []).append(note)
    scopes = [Scope.user()] + [Scope.agent(k) for k in sorted(set(live_agents) | {
        r.split("/")[2] for r in by_root if r.startswith("Memory/agents/")}, key=lambda k: (len(k), k))]
    scopes += [Scope("channel", r.split("/")[2]) for r in sorted(by_root) if r.startswith("Memory/channels/")]
    importances = notes_selectors.note_importances(owner_id=owner_id)
    result = []
    for scope in scopes:
        notes = by_root.get(scope.root, [])
        index = next((n for n in notes if n.path == scope.index_path), None)
        details = {n.path: n.content for n in notes}
        try:
            entries = []
            for e in parse_index(index.content) if index else []:
                try:
                    text = details.get(scope.topic_path(e.file), "") if e.file else ""
                except InvalidInput:  # a line written before such lines were refused, say "-> index.md"
                    text = ""
                importance = importances.get((scope.kind, scope.key, e.topic))
                entries.append({**e.as_dict(), "importance": importance,
                                "category": category_of(e.summary, text), **({"details": text} if with_details else {}),
                                "note_version": _listed_note_version(scope, e, details, importance)})
        except InvalidInput:
            entries = []
        item = {
            "kind": scope.kind, "key": scope.key, "root": scope.root,
            "label": ("Yours" if scope.kind == "user"
                      else live_agents.get(scope.key) or deleted_names.get(scope.key, scope.label)),
            "deleted_agent": scope.kind == "agent" and scope.key not in live_agents,
            "index": entries,
            "index_version": index.version if index else None,
            "bytes": len(index.content.encode()) if index else 0,
            "files": [{"path": n.path, "version": n.version} for n in notes],
            # topic files no index line names (made in Files, or left by an edit of the index): shown, since
            # recall reads them
            "unlisted": sorted(name for name in (n.path.rsplit("/", 1)[1] for n in notes if n.path != scope.index_path)
                               if name not in {e["file"] for e in entries if e["file"]}),
        }
        result.append(item)
    return result


def _listed_note_version(scope: Scope, entry: IndexEntry, files: dict[str, str], importance: float | None,
                         ) -> str | None:
    """``notes.selectors.note_version`` of a listed note, from the files the listing read (its topic file by
    its topic's name, as a write of the note finds it)."""
    try:
        details = files.get(scope.topic_path(entry.topic))
    except InvalidInput:  # a line an older version let through ("- index: …"): no topic file of its own
        details = None
    return notes_selectors.note_version(line=entry, details=details, importance=importance)


def listing_profile(scopes: list[dict]) -> Profile:
    """The profile (``categories.profile``) of the notes of ``scope_listing``'s scopes (with their details)."""
    return profile(ProfileNote(scope=Scope(s["kind"], s["key"]).name, topic=e["topic"], summary=e["summary"],
                               details=e.get("details") or "") for s in scopes for e in s["index"])


@extend_schema_field({"type": "number", "minimum": 0, "maximum": 1, "nullable": True})
class ImportanceField(serializers.Field):
    """A note's importance as the client sent it: ``notes.services.check_importance`` says what is wrong with
    it (a JSON field would refuse 1e400, read as infinity, with a message about JSON)."""

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


class NoteInput(serializers.Serializer):
    topic = StrictCharField(max_length=40)
    summary = StrictCharField(max_length=500, allow_blank=True)
    details = StrictCharField(required=False, allow_blank=True, max_length=64 * 1024)
    scope = StrictCharField(required=False, max_length=80)
    #: 0..1, or null for the writer's (checked by ``notes.services.check_importance``)
    importance = ImportanceField(required=False, allow_null=True)
    #: the scope's ``index_version`` as GET gave it (null: it had no notes); a stale one is a 409
    index_version = StrictIntegerField(required=False, allow_null=True, min_value=1)
    #: the note's ``note_version`` as GET gave it (null: there was no such note); a stale one is a 409
    note_version = StrictCharField(required=False, allow_null=True, max_length=40)


class NewNoteInput(serializers.Serializer):
    summary = StrictCharField(max_length=500, allow_blank=True)
    details = StrictCharField(required=False, allow_blank=True, max_length=64 * 1024)
    scope = StrictCharField(required=False, max_length=80)
    importance = ImportanceField(required=False, allow_null=True)


class ImportanceInput(serializers.Serializer):
    topic = StrictCharField(max_length=40)
    scope = StrictCharField(required=False, max_length=80)
    importance = ImportanceField(allow_null=True)
    note_version = StrictCharField(required=False, allow_null=True, max_length=40)


class NoteDeleteInput(serializers.Serializer):
    note_version = StrictCharField(required=False, allow_null=True, max_length=40)


def category_param(request) -> str | None:
    """The optional ``category`` query parameter, one of ``categories.CATEGORIES`` (else a 400)."""
    category = one_param(request, "category")
    if category is not None and category not in CATEGORIES:
        raise InvalidInput(f"category must be one of {', '.join(CATEGORIES)}", code="invalid_category")
    return category


def _written(*, owner_id: int, scope: Scope, topic: str) -> dict[str, str | int | None]:
    """What a note's write answers besides its change set: the scope's index, and the ``index_version`` and
    ``note_version`` to send with the next edit. Read in the write's transaction, under its lock."""
    return {"index": notes_selectors.index_text(owner_id=owner_id, scope=scope),
            "index_version": notes_selectors.index_version(owner_id=owner_id, scope=scope),
            "note_version": notes_selectors.note_version_now(owner_id=owner_id, scope=scope, topic=topic)}


class NotesApi(ApiView):
    @extend_schema(parameters=[OpenApiParameter("category", OpenApiTypes.STR, OpenApiParameter.QUERY,
                                                enum=list(CATEGORIES))],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """The indexes and topics of every scope: yours, each agent's, deleted agents', conversations'. Each
        note says who changed it last (``written_by``: ``user``, ``model`` or ``import``) and when
        (``written_at``), both null when its history is too old to tell, when a chat turn last brought it
        in as relevant (``used_at``, to the hour; null if none has since it was written), and its kind
        (``category``: credential, decision, preference, skill, project, identity or fact, read from its
        words); ``?category=`` lists only that kind."""
        from localai_memory.recall.service import activity_json, notes_activity

        category = category_param(request)
        scopes = scope_listing(owner_id=request.user.pk)
        activity = notes_activity(owner_id=request.user.pk)
        for scope in scopes:
            if category is not None:
                scope["index"] = [entry for entry in scope["index"] if entry["category"] == category]
            for entry in scope["index"]:
                entry.update(activity_json(activity.get((scope["kind"], scope["key"], entry["topic"]))))
        return Response({"scopes": scopes})

    @extend_schema(request=NoteInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request):
        """Add or replace one note, as on the Memory tab: ``{topic, summary, details?, scope?, importance?}``
        (details left out keep the topic file, ``""`` removes it; importance 0..1 for recall, null for the
        writer's; with the text unchanged only it changes). One change
        set (Undo: ``POST /api/chats/changes/{id}/undo``); past a cap, a 422 lists the current entries. Works
        while memory is off: the notes stay yours to edit. Send ``index_version`` (the scope's, as GET gave
        it; null when it had no notes) and an edit made from an older index than the one there now is a 409
        ``stale_version`` whose ``details`` hold the index as it is (``path``, ``version``, ``content``), as
        PUT /api/files/content does; left out, the note is written whatever changed meanwhile. The answer's
        ``index_version`` is the one to send with the next edit. ``note_version`` checks the note alone
        (null: a note that did not exist): an edit of another note meanwhile does not make it stale, an edit of
        this one's details does. The answer's ``note_version`` is the note's now."""
        from localai_memory.notes.api import change_json
        from localai_memory.notes.models import ChangeSet

        data = validated(NoteInput, request.data)
        scope = owned_scope(user_id=request.user.pk, raw=data.get("scope"), writes_topic=data["topic"])
        # The versions answered are read under the write's own lock, before it commits: another writer's edit
        # right after it is never answered as this one's (the next checked edit would pass over it unseen).
        with transaction.atomic():
            change = note_save(owner_id=request.user.pk, scope=scope, topic=data["topic"], summary=data["summary"],
                               details=data.get("details") or None, importance=data.get("importance", KEEP),
                               source=ChangeSet.Source.FILES, actor="you",
                               clear_details="details" in data and not data["details"].strip(),
                               index_version=data.get("index_version", UNCHECKED),
                               note_version=data.get("note_version", UNCHECKED))
            answer = {"change": change_json(change) if change else None,
                      **_written(owner_id=request.user.pk, scope=scope, topic=data["topic"])}
        return Response(answer)

    @extend_schema(request=NewNoteInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request):
        """Add a note without naming its topic: ``{summary, details?, scope?, importance?}``. The topic is made
        from the line's first words and its negations (``I live in Rome`` → ``live-rome``, ``I don't eat
        meat`` → ``dont-eat-meat``; one in use gets ``-2``). 201 with the topic, the change set (Undo) and, as
        PUT answers them, the ``index_version`` and ``note_version`` to send with the next edit; a 409
        ``already_saved`` names the note that has this line already."""
        from localai_memory.chats.remember import note_add
        from localai_memory.notes.api import change_json
        from localai_memory.notes.models import ChangeSet

        data = validated(NewNoteInput, request.data)
        scope = owned_scope(user_id=request.user.pk, raw=data.get("scope"), writes_topic="")
        with transaction.atomic():  # the versions answered are this write's (see put)
            change, topic = note_add(owner_id=request.user.pk, scope=scope, summary=data["summary"],
                                     details=data.get("details") or None, importance=data.get("importance", KEEP),
                                     source=ChangeSet.Source.FILES)
            if change is None:
                raise Conflict(f"That is already in memory, as the note {topic!r}.", code="already_saved",
                               details={"topic": topic, "scope": scope.name})
            importance = data.get("importance")
            answer = {"topic": topic, "scope": scope.name,
                      "importance": None if importance is None else float(importance),
                      "change": change_json(change), **_written(owner_id=request.user.pk, scope=scope, topic=topic)}
        return Response(answer, status=201)

    @extend_schema(request=ImportanceInput, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request):
        """Give one note an importance for recall: ``{topic, scope?, importance}``, 0 to 1 (how much it
        weighs among notes about as relevant), or null for the one its writer gives (you 0.8, an import 0.6,
        the assistant 0.4). Its text is not changed. Send ``note_version`` (the note's, as GET lists it) and
        a note changed since you read it is a 409 ``stale_version`` with the note as it is now. The answer's
        ``note_version`` is the note's now."""
        from localai_memory.notes.api import change_json

        data = validated(ImportanceInput, request.data)
        scope = owned_scope(user_id=request.user.pk, raw=data.get("scope"))
        with transaction.atomic():  # the version answered is this write's (see put)
            value, change = importance_change(owner_id=request.user.pk, scope=scope, topic=data["topic"],
                                              importance=data["importance"],
                                              note_version=data.get("note_version", UNCHECKED))
            answer = {"topic": data["topic"], "scope": scope.name, "importance": value,
                      "change": change_json(change) if change else None,
                      "note_version": notes_selectors.note_version_now(owner_id=request.user.pk, scope=scope,
                                                                       topic=data["topic"])}
        return Response(answer)

    @extend_schema(parameters=[OpenApiParameter("topic", str, required=True), OpenApiParameter("scope", str),
                               OpenApiParameter("note_version", str)],
                   request=NoteDeleteInput, responses={200: OpenApiTypes.OBJECT})
    def delete(self, request):
        """Forget one note (``?topic=…&scope=…``): its line and topic file go to the Trash as one change set.
        Send the ``note_version`` you read (``?note_version=``, or ``{"note_version": …}`` in a JSON body) and
        a note changed since is a 409 ``stale_version`` with the note as it is now, kept; left out, the note
        goes as it is now."""
        from localai_memory.notes.api import change_json, trash_json
        from localai_memory.notes.models import ChangeSet, TrashEntry
        from localai_memory.notes.services import note_upsert

        scope = owned_scope(user_id=request.user.pk, raw=one_param(request, "scope"))
        topic = one_param(request, "topic") or ""
        version = note_version_given(one_param(request, "note_version", UNCHECKED))
        if request.data != {}:  # a body: only the note's version, and one that agrees with ?note_version=
            sent = note_version_given(validated(NoteDeleteInput, request.data).get("note_version", UNCHECKED))
            if version is not UNCHECKED and sent is not UNCHECKED and sent != version:
                raise InvalidInput(f"?note_version={version} and the body's note_version {sent} differ: send one",
                                   code="invalid_version")
            version = version if version is not UNCHECKED else sent
        change = note_upsert(owner_id=request.user.pk, scope=scope, topic=topic, delete=True,
                             source=ChangeSet.Source.FILES, actor="you", note_version=version)
        entry = TrashEntry.objects.get(owner_id=request.user.pk, change_set=change)
        return Response({"change": change_json(change), "trash": trash_json(entry)})


class ProfileApi(ApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        """Your profile at a glance, from every note of every scope: the notes by kind (``categories``: each
        kind with its notes' scope, topic and line) and the names they mention most (``entities``: name, how
        many notes name it, their topics)."""
        return Response(listing_profile(scope_listing(owner_id=request.user.pk, with_details=True)).as_dict())
