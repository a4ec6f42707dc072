"""Recall rows (without vectors) for the notes written before recall existed; the catch-up embeds them.

Only the text is copied here, so the migration is fast and needs no model; ``tasks.recall_catch_up`` (run by
beat, or queued by the first turn that finds a user's notes without vectors) embeds them in batches.
"""

from __future__ import annotations

from django.db import migrations


def forwards(apps, schema_editor):
    from django.utils import timezone

    from localai_memory.core.errors import InvalidInput
    from localai_memory.notes.paths import check_topic, parse_index, parse_path

    NoteFile = apps.get_model("notes", "NoteFile")
    NoteVector = apps.get_model("recall", "NoteVector")
    rows = []
    now = timezone.now()
    for note in NoteFile.objects.filter(path__startswith="Memory/").iterator(chunk_size=2000):
        try:
            parsed = parse_path(note.path)
        except InvalidInput:
            continue
        scope = parsed.scope
        base = {"owner_id": note.owner_id, "scope_kind": scope.kind, "scope_key": scope.key,
                "updated_at": note.updated_at or now, "source": "user", "model_id": "", "embedding": None}
        if parsed.is_index:
            try:
                entries = parse_index(note.content)
            except InvalidInput:
                continue
            rows += [NoteVector(topic=e.topic, kind="line", path=note.path, text=e.summary, **base) for e in entries]
        elif note.content.strip():
            try:
                rows.append(NoteVector(topic=check_topic(parsed.topic), kind="details", path=note.path,
                                       text=note.content, **base))
            except InvalidInput:
                continue
        if len(rows) >= 2000:
            NoteVector.objects.bulk_create(rows, ignore_conflicts=True)
            rows = []
    if rows:
        NoteVector.objects.bulk_create(rows, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("recall", "0001_initial"),
        ("notes", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
