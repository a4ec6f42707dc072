"""The on-device embedder runs a derived 8-bit copy of its model now (``embedders.OnDeviceEmbedder``): the same
model and model id, with vectors within cosine ~0.999 of the package file's as loaded before.

That is close enough to rank with, not close enough to mix: measured on ``bench/recall_turn`` (10,000 users),
stored vectors of the old loading ranked against queries of the copy ordered near-tied notes differently
for 10 % of users and let 3 % recall one note fewer. So every stored vector is dropped again, as in 0004
(the row keeps its text, author and time), and the catch-up embeds them with the copy in batches; meanwhile
recall ranks those users' notes lexically and says ``no_vectors`` or ``low_coverage``. One UPDATE; going
back leaves the rows waiting the same way.
"""

from __future__ import annotations

from django.db import migrations


def drop_vectors(apps, schema_editor):
    NoteVector = apps.get_model("recall", "NoteVector")
    NoteVector.objects.exclude(model_id="").update(embedding=None, model_id="", dim=None)


class Migration(migrations.Migration):
    dependencies = [
        ("recall", "0004_reembed_passages_as_my_topic"),
    ]

    operations = [migrations.RunPython(drop_vectors, drop_vectors)]
