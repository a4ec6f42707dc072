"""The recall copy of every note: one row per passage (an index line, a topic file's part) with its embedding.

A topic file is one passage when it is short (up to ~80 words) and several ``part``s (0, 1, …) when it is
longer (``ranking.details_parts``): the embedder reads only the first 128 tokens of a text, so a fact in the
third paragraph of a long file would otherwise be invisible to recall by meaning. The parts join back into
the file exactly; an index line is always part 0.

These rows are derived from the notes store and rebuilt from it at any time (``index.owner_reindex``); only
``recall.index`` writes them, inside the transaction of the note write that changed them. A row without an
embedding (no embedder, or it failed) is still a row: lexical recall reads its text, and the Celery catch-up
embeds it later. Each vector carries the ``model_id`` and ``dim`` that made it, so vectors of two models
are never compared: a model switch re-embeds the rows instead of mixing them.

Recall reads one owner's rows of the allowed scopes through the B-tree of ``recall_one_row_per_passage``
(owner, scope_kind, scope_key, topic, kind, part) and ranks them exactly. There is deliberately no approximate
vector index on this table: a global HNSW/IVF scan filtered by owner afterwards returns short or empty results.

``search`` is the passage's PostgreSQL full-text vector (``topic: text`` with the ``english`` configuration),
a stored generated column: PostgreSQL computes it on every insert and update (COPY included, as long as the
column list leaves it out), so no writer fills it. Lexical recall ranks the same owner- and scope-filtered
rows against it (``service.lexical_scores``); like the vectors, it has no index of its own, since a global
GIN scan filtered by owner afterwards would read every user's rows that share a word.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Value
from django.db.models.functions import Concat
from pgvector.django import VectorField

#: The two kinds of passage and the three authors, as plain strings for code that compares them.
LINE, DETAILS = "line", "details"
SOURCE_USER, SOURCE_MODEL, SOURCE_IMPORT = "user", "model", "import"

#: The text search configuration of ``NoteVector.search`` and of every lexical query against it (they must
#: be the same). ``english`` stems ("cooking" meets "cook") and drops English function words; text in any
#: other language is still split into words and lower-cased, and a word matches its own spelling (the
#: English stemmer is applied to both sides alike), but its inflections do not meet. ``simple`` would treat
#: every language alike but stems nothing and drops no function word: on bench/recall it found the right
#: note first for 0.43 of the queries against 0.55 with ``english`` (bench/recall/README.md).
TEXT_SEARCH_CONFIG = "english"


class NoteVector(models.Model):
    """One passage of one note of one owner: its text, who wrote it, and its embedding (or none yet)."""

    class Kind(models.TextChoices):
        LINE = "line", "Index line"
        DETAILS = "details", "Topic file"

    class Source(models.TextChoices):
        USER = "user", "Written or accepted by a person"
        MODEL = "model", "Saved by the model on its own"
        IMPORT = "import", "Imported"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="note_vectors",
                              db_index=False)  # the unique constraint's B-tree leads with owner
    scope_kind = models.CharField(max_length=10)
    scope_key = models.CharField(max_length=60, blank=True)
    topic = models.CharField(max_length=40)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    path = models.CharField(max_length=200, help_text="The file the passage comes from.")
    part = models.PositiveSmallIntegerField(
        default=0, db_default=0,
        help_text="Which passage of the topic file, from 0 (a short file has one; an index line is 0).")
    text = models.TextField(help_text="The index line's summary, or the topic file's text (this part of it).")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.USER)
    updated_at = models.DateTimeField()
    used_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When a chat turn last showed the note to the model as relevant (recall), to the hour; none "
                  "since it was written.")
    embedding = VectorField(null=True, blank=True)
    model_id = models.CharField(max_length=120, blank=True, help_text="The model that made the embedding.")
    dim = models.PositiveIntegerField(null=True, blank=True)
    search = models.GeneratedField(
        expression=SearchVector(Concat("topic", Value(": "), "text", output_field=models.TextField()),
                                config=TEXT_SEARCH_CONFIG),
        output_field=SearchVectorField(), db_persist=True,
        help_text="The passage's full-text vector (topic and text), kept by PostgreSQL; lexical recall reads it.")

    class Meta:
        constraints = [
            # Also the index recall filters by: owner first, then the scope, then the passage.
            models.UniqueConstraint(fields=["owner", "scope_kind", "scope_key", "topic", "kind", "part"],
                                    name="recall_one_row_per_passage"),
            models.CheckConstraint(
                condition=(models.Q(embedding__isnull=True, model_id="", dim__isnull=True)
                           | (models.Q(embedding__isnull=False, dim__isnull=False) & ~models.Q(model_id=""))),
                name="recall_vector_names_its_model",
            ),
            models.CheckConstraint(condition=models.Q(scope_kind__in=["user", "agent", "channel"]),
                                   name="recall_scope_kind_valid"),
        ]
        indexes = [
            # The catch-up finds the rows without a vector of the current model (none: model_id "") by
            # model id, in id order, without reading the whole table.
            models.Index(fields=["model_id", "id"], name="recall_model_rows"),
        ]

    def __str__(self) -> str:
        part = f" part {self.part}" if self.part else ""
        return f"{self.owner_id}:{self.scope_kind}:{self.scope_key}/{self.topic} ({self.kind}{part})"
