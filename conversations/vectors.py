"""Messages' embedding vectors: made once per message, off the request path, stored
compactly, and compared by brute force.

* **When.** The chat job embeds its user's message when it starts (in the worker; the
  vector is also the query of its own search) and its reply once stored. Messages
  stored otherwise (imports), or while the embedder was down, are caught up by the
  ``embed_pending`` schedule (every minute) or ``manage.py embed_history``, which also
  re-embeds after a change of model.
* **How stored.** ``MessageEmbedding``: the vector scaled to signed bytes (a 384-d
  vector is 384 bytes), with the model's name and the dimension.
* **How compared.** A search reads the conversation's vectors of the current model below
  ``before_seq`` through the ``(conversation, model, seq)`` index and takes the cosine
  similarity with numpy: a matrix product over int8 rows. Vectors of another model are
  never read.
"""

from collections.abc import Iterable

import numpy as np
from django.db import connection
from django.db.models import Exists, OuterRef

from conversations.models import Message, MessageEmbedding
from gateway import embeddings

NO_BOUND = 2**31 - 1


def quantize(vector: np.ndarray) -> bytes:
    """The vector as signed bytes, its largest component at +-127."""
    peak = float(np.max(np.abs(vector))) or 1.0
    return np.round(vector * (127.0 / peak)).astype(np.int8).tobytes()


def _store(rows: list[tuple[int, str, int]], vectors: np.ndarray, model: str) -> None:
    objects = [
        MessageEmbedding(
            message_id=message_id,
            conversation_id=conversation_id,
            seq=seq,
            model=model,
            dimension=vectors.shape[1],
            vector=quantize(vector),
        )
        for (message_id, conversation_id, seq), vector in zip(rows, vectors, strict=True)
    ]
    MessageEmbedding.objects.bulk_create(
        objects,
        update_conflicts=True,
        unique_fields=["message"],
        update_fields=["model", "dimension", "vector", "created_at"],
    )


def messages_embed(*, message_ids: Iterable[int]) -> int:
    """Embeds these messages with the current model and stores their vectors (replacing
    any of another model). Returns how many; raises EmbeddingUnavailable."""
    model = embeddings.model_id()
    if model is None:
        raise embeddings.EmbeddingUnavailable("EMBEDDING_BACKEND is none")
    found = list(
        Message.objects.filter(pk__in=list(message_ids))
        .order_by()
        .values_list("id", "conversation_id", "seq", "content")
    )
    if not found:
        return 0
    vectors = embeddings.embed([content for *_, content in found])
    for (*_, content), vector in zip(found, vectors, strict=True):
        embeddings.remember(content, vector)
    _store([(pk, conversation, seq) for pk, conversation, seq, _ in found], vectors, model)
    return len(found)


def pending(*, conversation_id: str | None = None, limit: int) -> list[int]:
    """Ids of messages without a vector of the current model, newest first."""
    model = embeddings.model_id()
    if model is None:
        return []
    done = MessageEmbedding.objects.filter(message=OuterRef("pk"), model=model)
    messages = Message.objects.filter(~Exists(done))
    if conversation_id is not None:
        messages = messages.filter(conversation_id=conversation_id)
    return list(messages.order_by("-id").values_list("id", flat=True)[:limit])


def embed_pending(
    *, conversation_id: str | None = None, limit: int | None = None, batch: int = 256
) -> int:
    """Embeds messages that lack a vector of the current model, newest first, in
    batches, until none is left or ``limit`` are done. Raises EmbeddingUnavailable."""
    done = 0
    while limit is None or done < limit:
        size = batch if limit is None else min(batch, limit - done)
        ids = pending(conversation_id=conversation_id, limit=size)
        if not ids:
            break
        done += messages_embed(message_ids=ids)
    return done


def similarities(
    *, conversation_id: str, query: np.ndarray, before_seq: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The cosine similarity of the query vector (of the current model) with every
    message of the conversation that has a vector of that model and ``seq < before_seq``:
    ``(seqs, similarities)`` in the order of ``seq``. One indexed read of the rows as raw
    tuples (the ORM's per-row work would cost more than the arithmetic)."""
    table = MessageEmbedding._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq, vector FROM {table} "
            "WHERE conversation_id = %s AND model = %s AND dimension = %s AND seq < %s "
            "ORDER BY seq",
            [conversation_id, embeddings.model_id(), len(query), before_seq or NO_BOUND],
        )
        pairs = cursor.fetchall()
    if not pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    seqs = np.fromiter((seq for seq, _ in pairs), dtype=np.int64, count=len(pairs))
    raw = b"".join(bytes(vector) for _, vector in pairs)
    matrix = np.frombuffer(raw, dtype=np.int8).reshape(len(pairs), -1).astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    return seqs, (matrix @ query.astype(np.float32)) / np.maximum(norms, 1e-6)


def lookup(seqs: np.ndarray, scores: np.ndarray, wanted: list[int]) -> dict[int, float]:
    """The scores of the ``wanted`` seqs that ``seqs`` (sorted) has."""
    if not len(seqs) or not wanted:
        return {}
    where = np.searchsorted(seqs, wanted)
    return {
        seq: float(scores[i])
        for seq, i in zip(wanted, where.tolist(), strict=True)
        if i < len(seqs) and seqs[i] == seq
    }


def best(seqs: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` best ``(seq, score)``, best first."""
    count = min(limit, len(scores))
    if count < 1:
        return []
    top = np.argpartition(-scores, count - 1)[:count]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(seqs[i]), float(scores[i])) for i in top]
