"""Writes of memory settings and the provider choice."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from localai_memory.core.errors import InvalidInput, NotFound

from .models import AddonForgetRequest, MemorySettings, MessagingSave, SaveMode
from .providers import (
    BUILTIN,
    OFF,
    AddonForget,
    addon,
    addon_forget_namespace,
    addons_export,
    addons_forget,
    canonical,
)
from .selectors import MemoryState, addons_used, memory_state


def _row_for_update(user_id: int) -> MemorySettings:
    MemorySettings.objects.get_or_create(user_id=user_id)
    return MemorySettings.objects.select_for_update().get(user_id=user_id)


@transaction.atomic
def settings_update(*, user_id: int, enabled: bool | None = None, save_mode: str | None = None,
                    messaging_save: str | None = None, consolidation_enabled: bool | None = None,
                    mcp_propose_enabled: bool | None = None) -> MemoryState:
    """Change any of the memory settings; a field left as None stays as it is."""
    if save_mode is not None and save_mode not in SaveMode.values:
        raise InvalidInput(f"save_mode must be one of {', '.join(SaveMode.values)}", code="invalid_save_mode")
    if messaging_save is not None and messaging_save not in MessagingSave.values:
        raise InvalidInput(f"messaging_save must be one of {', '.join(MessagingSave.values)}",
                           code="invalid_messaging_save")
    row = _row_for_update(user_id)
    fields = ["updated_at"]
    if enabled is not None:
        row.enabled, row.enabled_set = enabled, True
        fields += ["enabled", "enabled_set"]
    if save_mode is not None:
        row.save_mode, row.save_mode_set = save_mode, True
        fields += ["save_mode", "save_mode_set"]
    if messaging_save is not None:
        row.messaging_save = messaging_save
        fields.append("messaging_save")
    if consolidation_enabled is not None:
        row.consolidation_enabled = consolidation_enabled
        fields.append("consolidation_enabled")
    if mcp_propose_enabled is not None:
        row.mcp_propose_enabled = mcp_propose_enabled
        fields.append("mcp_propose_enabled")
    row.save(update_fields=fields)
    return memory_state(user_id=user_id)


@transaction.atomic
def provider_pick(*, user_id: int, provider: str) -> MemoryState:
    """Pick the memory provider: builtin, off (the same as the switch), or an installed add-on.

    "One serves at a time": picking another provider than the one chosen drops the suggestions still waiting
    for a memory add-on other than the new choice (``proposals.proposals_drop_for_provider``), so none is saved
    into an add-on that no longer serves. Off keeps the choice, and them. Under the owner's note lock, which a
    confirm holds while it checks the add-on is still the choice."""
    from localai_memory.notes.services import lock_owner

    from .proposals import proposals_drop_for_provider

    if not isinstance(provider, str) or not provider:
        raise InvalidInput("provider is required", code="invalid_provider")
    provider = canonical(provider)  # "memory", the old add-on's name, is the built-in provider
    if provider not in (BUILTIN, OFF) and addon(provider) is None:
        raise InvalidInput(f"no installed add-on serves memory as {provider!r}", code="unknown_provider")
    lock_owner(user_id)
    row = _row_for_update(user_id)
    if provider == OFF:
        row.enabled = False
    else:
        if canonical(row.provider) != provider:
            proposals_drop_for_provider(owner_id=user_id, provider=provider)
        row.enabled, row.provider = True, provider
        if provider != BUILTIN and provider not in row.addons_used:  # it may hold their notes from now on
            row.addons_used = [*row.addons_used, provider]
    row.enabled_set = True
    row.save(update_fields=["enabled", "enabled_set", "provider", "addons_used", "updated_at"])
    return memory_state(user_id=user_id)


def settings_mark_forgotten(*, user_id: int) -> datetime:
    """Record that the user forgot everything now (``MemorySettings.forgot_at``), and return the time: a chat
    turn that read before it saves and suggests nothing afterwards (``selectors.forgotten_after``). Call inside
    the forget's transaction, under the owner's note lock, where the turn's write checks.

    The time is the database's clock (``statement_timestamp()``), as is the time a turn's message arrived
    (``chats.selectors.read_turn_memory``), which is compared with it: the frontend that forgets and the one
    running the turn may be two hosts whose clocks differ. Each forget is recorded later than the one before,
    even if that clock was set back. Not a change of the settings: ``updated_at`` stays."""
    _row_for_update(user_id)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {MemorySettings._meta.db_table} SET forgot_at = GREATEST(statement_timestamp(), "
                       "forgot_at + interval '1 microsecond') WHERE user_id = %s RETURNING forgot_at", [user_id])
        return cursor.fetchone()[0]


def memory_export_all(*, user_id: int) -> bytes:
    """Export: the zip of every Memory file, with the own export of each memory add-on the user used beside
    them (``addons/<name>/…``), whether it serves now or not (``providers.addons_export``)."""
    import io
    import zipfile

    from localai_memory.notes.services import memory_export

    body = memory_export(owner_id=user_id)
    extra = addons_export(addons_used(user_id=user_id), user_id=user_id)
    if not extra:
        return body
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(body)) as notes, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in notes.infolist():
            archive.writestr(info, notes.read(info))
        for path, data in extra:
            archive.writestr(path, data)
    return out.getvalue()


def memory_forget_all(*, user_id: int) -> tuple[Any, list[AddonForget]]:
    """Forget everything: every note to the Trash (``notes.services.memory_forget``), the suggestions still
    waiting dropped, every chat marked as read for suggestions (``growth.consolidation
    .consolidation_forget_chats``: nothing said before is suggested afterwards, not even by a pass that was
    running) and the time recorded (``settings_mark_forgotten``: a chat turn still answering suggests and
    saves nothing it read before), in one transaction; and every memory add-on the user used asked to forget
    its own, whether it serves now or not (``addons_forget_all``), with what each answered."""
    from localai_memory.growth.consolidation import consolidation_forget_chats
    from localai_memory.notes.services import memory_forget

    from .proposals import proposals_drop_for_forget

    with transaction.atomic():
        entry = memory_forget(owner_id=user_id, actor="you")  # holds the owner's note lock to the commit
        proposals_drop_for_forget(owner_id=user_id)
        consolidation_forget_chats(owner_id=user_id)
        settings_mark_forgotten(user_id=user_id)
    return entry, addons_forget_all(user_id=user_id)


def addons_forget_all(*, user_id: int) -> list[AddonForget]:
    """Ask every memory add-on the user used to forget their notes (``providers.addons_forget``). One that
    forgot and no longer serves them holds nothing of theirs now, so later exports and forgets leave it out;
    one that could not be asked stays, and is named in each answer until it forgets."""
    answers = addons_forget(addons_used(user_id=user_id), user_id=user_id)
    done = {answer.name for answer in answers if answer.status == "forgot"}
    if done:
        # it forgot every namespace of the person: a deleted agent's it was still to drop too
        AddonForgetRequest.objects.filter(owner_id=user_id, addon__in=done).delete()
        with transaction.atomic():
            row = _row_for_update(user_id)
            kept = [name for name in row.addons_used if name not in done or name == canonical(row.provider)]
            if kept != row.addons_used:
                row.addons_used = kept
                row.save(update_fields=["addons_used"])
    return answers


#: The answers of an add-on asked to drop a namespace that leave a request to ask it again.
ASK_AGAIN = {AddonForgetRequest.Answer.NOT_RUNNING, AddonForgetRequest.Answer.FAILED}


def addon_forgets_record(*, owner_id: int, namespace: str, whose: str, answers: list[AddonForget]) -> None:
    """Keep what the add-ons answered when asked to drop ``namespace`` (a deleted agent's): one that was not
    running or failed may still hold those notes, so the request stays, to ask again (``addon_forget_again``);
    any other answer settles it (it forgot, or it can no longer be asked and the message said where to look)."""
    for answer in answers:
        if answer.status in ASK_AGAIN:
            AddonForgetRequest.objects.update_or_create(
                owner_id=owner_id, addon=answer.name, namespace=namespace,
                defaults={"whose": whose[:300], "answer": answer.status, "asked_at": timezone.now()})
        else:
            AddonForgetRequest.objects.filter(owner_id=owner_id, addon=answer.name, namespace=namespace).delete()


def addon_forget_again(*, owner_id: int, request_id: int) -> tuple[AddonForget, AddonForgetRequest | None]:
    """Ask the add-on of the owner's request ``request_id`` again to drop its namespace: what it answered, and
    the request if it still waits (not running, failed again), else None. NotFound for another owner's."""
    request = AddonForgetRequest.objects.filter(owner_id=owner_id, pk=request_id).first()
    if request is None:
        raise NotFound("There is no such request to a memory add-on.", code="addon_forget_not_found")
    answer = addon_forget_namespace(request.addon, user_id=owner_id, namespace=request.namespace,
                                    whose=request.whose)
    addon_forgets_record(owner_id=owner_id, namespace=request.namespace, whose=request.whose, answers=[answer])
    return answer, AddonForgetRequest.objects.filter(pk=request.pk).first()
