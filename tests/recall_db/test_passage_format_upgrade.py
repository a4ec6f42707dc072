"""Upgrading to "my topic: …" passages: the stored vectors of the old text are dropped, recall reads the notes
lexically (and says why) until the catch-up has embedded them again, then recalls them by meaning."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from django.apps import apps

from localai_memory.notes.paths import Scope
from localai_memory.recall import index, service
from localai_memory.recall.embedders import FAST_MODEL_ID, ONDEVICE_MODEL_ID, OnDeviceEmbedder
from localai_memory.recall.models import LINE, NoteVector

from .conftest import note

pytestmark = pytest.mark.django_db

upgrade = importlib.import_module("localai_memory.recall.migrations.0004_reembed_passages_as_my_topic")


def test_after_the_upgrade_notes_are_read_by_words_until_they_are_embedded_as_my_topic_passages(owner):
    note(owner, "home", "lives in Rome", details="A flat in Trastevere, near the river.")
    note(owner, "diet", "vegetarian")
    upgrade.drop_vectors(apps, None)
    assert NoteVector.objects.filter(owner=owner, embedding__isnull=False).count() == 0

    waiting = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Which neighbourhood am I in?")
    assert (waiting.mode, waiting.degraded) == ("lexical", "no_vectors")
    # No shared word: a question about oneself gets the notes the user typed, at most two.
    assert sorted(r.note.topic for r in waiting.items) == ["diet", "home"]

    assert index.catch_up_batch(owner_id=owner.pk).embedded == 3
    line = NoteVector.objects.get(owner=owner, topic="home", kind=LINE)
    expected = OnDeviceEmbedder().embed(["my home: lives in Rome"])[0]
    assert float(np.asarray(line.embedding, dtype=np.float32) @ expected) > 0.999
    again = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Which neighbourhood am I in?")
    assert again.mode == "semantic" and again.degraded is None
    assert [r.note.topic for r in again.items][:1] == ["home"]



def test_vectors_of_the_package_file_are_made_again_by_the_faster_copy_and_never_mixed(owner):
    """Stored before the faster copy existed, a vector carries the package file's model id: recall does not
    rank it against the copy's query vectors, and the catch-up embeds it again with the copy."""
    note(owner, "home", "lives in Rome")
    NoteVector.objects.filter(owner=owner).update(model_id=ONDEVICE_MODEL_ID)  # as the version before wrote it
    waiting = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Where do I live?")
    assert (waiting.mode, waiting.degraded) == ("lexical", "dim_mismatch")  # another model's vectors
    assert index.catch_up_batch(owner_id=owner.pk).embedded == 1
    line = NoteVector.objects.get(owner=owner, topic="home", kind=LINE)
    copy = OnDeviceEmbedder()
    assert line.model_id == copy.model_id == FAST_MODEL_ID
    assert "matmulnbits" in copy.running_file.name  # the derived copy, not the package's file
    assert float(np.asarray(line.embedding, dtype=np.float32) @ copy.embed(["my home: lives in Rome"])[0]) > 0.99999
    again = service.recall_notes(owner_id=owner.pk, scopes=[Scope.user()], query="Where do I live?")
    assert again.mode == "semantic" and [r.note.topic for r in again.items][:1] == ["home"]
