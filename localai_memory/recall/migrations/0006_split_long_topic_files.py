"""Split the recall row of every existing long topic file into its parts (``ranking.details_parts``).

Before, a topic file had one row, and the embedder read only its first ~90 words. Here each such row keeps
part 0's text and the rest of the file becomes rows of parts 1, 2, … with the same owner, scope, path,
author and time. Every row whose text changed here is left without an embedding (``model_id`` "", ``dim``
NULL, as ``recall_vector_names_its_model`` demands), so no vector of the whole file's start stays on a row
that now holds only part 0; the Celery catch-up (``tasks.recall_catch_up``: beat's sweep, or queued by a
write or a turn that finds rows waiting) embeds them. Meanwhile the note is still recalled by its index
line's vector, and by words. Short files, nearly all of them, are not touched.

Why a migration and not a reindex: it needs no embedder and no notes store, runs as one pass over the long
rows only, and a long file's later parts are there for lexical recall at once, without waiting for the
file's next edit (``index.scopes_sync`` keeps the parts from then on, with the same splitter). The splitter
is the app's as it is when this runs; should it change later, the next write of a file re-splits it.

Going back joins each file's parts into part 0 again (they join back into the file exactly), without an
embedding for the catch-up of that version, and deletes the other parts, so ``0005`` can restore the
unique constraint without ``part``.
"""

from __future__ import annotations

from django.db import migrations
from django.db.models.functions import Length


def split_long_files(apps, schema_editor):
    from localai_memory.recall.ranking import PASSAGE_MAX_PIECES, details_parts

    NoteVector = apps.get_model("recall", "NoteVector")
    # A text of more than PASSAGE_MAX_PIECES words and marks has more characters than that: a cheap filter.
    long_rows = (NoteVector.objects.filter(kind="details", part=0).annotate(length=Length("text"))
                 .filter(length__gt=PASSAGE_MAX_PIECES).order_by("id"))
    for row in long_rows.defer("embedding", "search").iterator(chunk_size=500):
        parts = details_parts(row.text)
        if len(parts) == 1:
            continue
        NoteVector.objects.filter(owner_id=row.owner_id, scope_kind=row.scope_kind, scope_key=row.scope_key,
                                  topic=row.topic, kind="details", part__gt=0).delete()
        NoteVector.objects.filter(pk=row.pk).update(text=parts[0], embedding=None, model_id="", dim=None)
        NoteVector.objects.bulk_create([
            NoteVector(owner_id=row.owner_id, scope_kind=row.scope_kind, scope_key=row.scope_key, topic=row.topic,
                       kind="details", part=n, path=row.path, text=text, source=row.source,
                       updated_at=row.updated_at, embedding=None, model_id="", dim=None)
            for n, text in enumerate(parts[1:], start=1)
        ])


def join_parts(apps, schema_editor):
    NoteVector = apps.get_model("recall", "NoteVector")
    files = (NoteVector.objects.filter(kind="details", part__gt=0)
             .values_list("owner_id", "scope_kind", "scope_key", "topic").distinct())
    for owner_id, scope_kind, scope_key, topic in list(files):
        rows = NoteVector.objects.filter(owner_id=owner_id, scope_kind=scope_kind, scope_key=scope_key,
                                         topic=topic, kind="details")
        texts = list(rows.order_by("part").values_list("part", "text"))
        first = min(part for part, _ in texts)
        rows.filter(part=first).update(part=0, text="".join(text for _, text in texts), embedding=None,
                                       model_id="", dim=None)
        rows.filter(part__gt=0).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("recall", "0005_notevector_part"),
    ]

    operations = [migrations.RunPython(split_long_files, join_parts)]
