"""django-q2 entry points of the conversations app."""

from django.conf import settings

from conversations import vectors
from gateway.embeddings import EmbeddingUnavailable


def embed_pending() -> dict[str, object]:
    """The scheduled catch-up: messages stored while the embedder was down, or before a
    change of model, get their vector (at most EMBEDDING_CATCHUP_BATCH a run)."""
    try:
        done = vectors.embed_pending(limit=settings.EMBEDDING_CATCHUP_BATCH)
    except EmbeddingUnavailable as exc:
        return {"embedded": 0, "error": str(exc)}
    return {"embedded": done}
