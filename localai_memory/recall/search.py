"""One turn's recall over already-loaded candidates: decide semantic or lexical, embed the query, rank.

This is the only place that joins a provider (``embedders``) to the pure ranking (``ranking``): it checks
the candidates' vectors against the provider, embeds the turn's query when that is worth doing, turns a
provider failure into ``query_embed_failed`` instead of an error, and ranks. It reads no database and no
settings: the caller loads the candidates of the scopes the turn may read (owner and scope filtered first)
and passes ``get_embedder()``. The app's turns go through ``service.recall_notes``, which ranks a lexical
turn in PostgreSQL full text; here a lexical turn uses the candidates' ``lexical`` ranks when the caller
computed them there (``service.lexical_scores``), else the content words they share with the query.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from localai_memory.recall.embedders import Embedder, EmbeddingError
from localai_memory.recall.ranking import (
    DEFAULT_CONFIG,
    Candidate,
    DegradeReason,
    RecallConfig,
    RecallQuery,
    RecallResult,
    choose_degrade_reason,
    rank_notes,
    vector_coverage,
)

logger = logging.getLogger(__name__)


def recall_notes(
    candidates: Sequence[Candidate],
    *,
    query: RecallQuery | str | None,
    embedder: Embedder | None,
    now: datetime,
    config: RecallConfig = DEFAULT_CONFIG,
) -> RecallResult:
    """The notes to put in front of the model for ``query``, best first, and how they were chosen.

    Semantic when a provider is configured, at least ``config.min_coverage`` of the candidates carry a
    vector of its model and dimension, and the query embeds; otherwise lexical, with the degrade reason
    (see ``choose_degrade_reason``). The query is embedded only when semantic ranking can follow, so a
    store that is still being embedded costs no embedding call. Never raises for a provider failure.
    """
    if isinstance(query, str):
        query = RecallQuery(text=query)
    if query is None or not query.text.strip() or not candidates:
        reason = None if embedder is not None else DegradeReason.NO_EMBEDDER
        return RecallResult(items=(), mode="semantic" if reason is None else "lexical", degrade_reason=reason)

    model_id = embedder.model_id if embedder is not None else None
    coverage = vector_coverage(candidates, model_id=model_id, dim=None)
    reason = choose_degrade_reason(embedder_present=embedder is not None, coverage=coverage,
                                   min_coverage=config.min_coverage)
    query_vectors = None
    if reason is None and embedder is not None:
        try:
            query_vectors = embedder.embed(query.texts_to_embed())
        except EmbeddingError as exc:
            logger.warning("recall: embedding the query failed (%s); ranking lexically", exc)
            reason = DegradeReason.QUERY_EMBED_FAILED
        else:
            # Same model name, different dimension (a server swapped its model): never compare those.
            coverage = vector_coverage(candidates, model_id=model_id, dim=int(query_vectors.shape[1]))
            reason = choose_degrade_reason(embedder_present=True, coverage=coverage,
                                           min_coverage=config.min_coverage)
    return rank_notes(
        candidates, query=query, now=now, query_vectors=query_vectors if reason is None else None,
        query_model_id=model_id, degrade_reason=reason, config=config,
    )
