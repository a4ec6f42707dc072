"""Recall embeds each passage as ``"my topic: text"`` now (``ranking.passage_text``), no longer ``"topic: text"``.

Vectors of the old text would be compared against a gate measured on the new one, so every stored vector is
dropped here (the row keeps its text, author and time) and the catch-up (``tasks.recall_catch_up``, run by
beat or queued by the first turn that finds a user's rows without vectors) embeds them again in batches.
Meanwhile recall ranks those users' notes lexically and says ``no_vectors`` or ``low_coverage``. The
migration needs no model and is one UPDATE; going back leaves the rows waiting the same way.
"""

from __future__ import annotations

from django.db import migrations


def drop_vectors(apps, schema_editor):
    NoteVector = apps.get_model("recall", "NoteVector")
    NoteVector.objects.exclude(model_id="").update(embedding=None, model_id="", dim=None)


class Migration(migrations.Migration):
    dependencies = [
        ("recall", "0003_notevector_search"),
    ]

    operations = [migrations.RunPython(drop_vectors, drop_vectors)]
