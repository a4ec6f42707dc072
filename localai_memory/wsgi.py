"""WSGI entry point: ``localai_memory.wsgi:application``.

Once the app is loaded, everything it loaded (Django, the URL configuration, the views and their modules) is
moved out of the garbage collector's sight with ``gc.freeze()``: those objects live as long as the process,
and a full collection that walks them all (~190,000 objects) stops a worker for ~95 ms on a small machine,
a pause that lands on whichever chat turn is running. Objects made later are collected as usual.

Served here, a request's after-response work (``core.after_response``) runs on a thread of its own, so a
client's next request on a kept-alive connection does not wait for the last one's bookkeeping.
"""

from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application

from localai_memory.core.after_response import run_in_background

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
application = get_wsgi_application()


def _load_everything_then_freeze() -> None:
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports every view module now, not on the first request
    _load_the_embedder()
    from localai_memory.chats.llm import model_client_warm

    model_client_warm()  # the model client's TLS context (~20 ms: certificates) now, not in the first turn
    gc.collect()
    gc.freeze()


def _load_the_embedder() -> None:
    """Load the on-device model as the worker starts, not in its first chat turn (0.2 s; on a machine's
    first start, deriving its faster copy: ~1 s, or a wait for the process deriving it)."""
    from localai_memory.recall.embedders import EmbeddingError, OnDeviceEmbedder
    from localai_memory.recall.index import current_embedder

    embedder = current_embedder()
    if isinstance(embedder, OnDeviceEmbedder):
        try:
            embedder.load()
        except EmbeddingError:  # logged by the embedder; recall says why in each turn
            pass


_load_everything_then_freeze()
run_in_background()
