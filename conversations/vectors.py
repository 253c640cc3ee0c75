"""Messages' embedding vectors: made once per message, off the request path, stored
compactly, and compared by brute force.

* **When.** The chat job stores its user's message's vector when it starts (the same
  vector is its search's query), and its reply's once the reply is stored (in the
  worker). Messages stored otherwise (imports), or while the embedder was down, are
  caught up, oldest first, by the ``embed_pending`` schedule (every minute) or
  ``manage.py embed_history``, which also re-embeds after a change of model; until
  then, search finds them by their words (``conversations.retrieval``).
* **How stored.** ``MessageEmbedding``: the vector scaled to signed bytes (a 384-d
  vector is 384 bytes), with the model's name and the dimension.
* **How compared.** By brute force over the conversation's vectors of the current model
  below ``before_seq``, which each process keeps between turns and brings up to date
  with one aggregate and the rows added since (``conversations.vector_cache``): cosine
  similarity with numpy over int8 rows. Vectors of another model are never read.
"""

from collections.abc import Iterable
from datetime import timedelta

import numpy as np
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from conversations import vector_cache
from conversations.models import EmbeddingCatchUp, Message, MessageEmbedding
from gateway import embeddings

NO_BOUND = 2**31 - 1
# The longest a transaction that stores messages may stay open (see EmbeddingCatchUp).
CATCH_UP_GRACE = timedelta(minutes=10)


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
    vector_cache.stored()


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
    return _embed_rows(found, model)


def messages_embed_loaded(messages: list[Message]) -> int:
    """:func:`messages_embed` for messages the caller has read already (no read here)."""
    model = embeddings.model_id()
    if model is None:
        raise embeddings.EmbeddingUnavailable("EMBEDDING_BACKEND is none")
    return _embed_rows([(m.pk, m.conversation_id, m.seq, m.content) for m in messages], model)


def _embed_rows(found: list[tuple[int, str, int, str]], model: str) -> int:
    if not found:
        return 0
    vectors = embeddings.embed([content for *_, content in found])
    for (*_, content), vector in zip(found, vectors, strict=True):
        embeddings.remember(content, vector)
    _store([(pk, conversation, seq) for pk, conversation, seq, _ in found], vectors, model)
    return len(found)


def message_vectors_store(*, messages: list[Message], vectors: np.ndarray) -> int:
    """Stores vectors made elsewhere by the current embedding model, one row of ``vectors``
    per message, in order (replacing any of another model): for a caller that has embedded
    the same texts before and need not have them made again. Returns how many; raises
    EmbeddingUnavailable."""
    model = embeddings.model_id()
    if model is None:
        raise embeddings.EmbeddingUnavailable("EMBEDDING_BACKEND is none")
    _store([(m.pk, m.conversation_id, m.seq) for m in messages], vectors, model)
    return len(messages)


def messages_embed_at(*, conversation_id: str, seqs: list[int]) -> int:
    """:func:`messages_embed` for messages of one conversation named by their seqs."""
    ids = Message.objects.filter(conversation_id=conversation_id, seq__in=seqs).values_list(
        "id", flat=True
    )
    return messages_embed(message_ids=list(ids))


def _checked_below(model: str) -> int:
    mark = EmbeddingCatchUp.objects.filter(model=model).values_list("below_id", flat=True)
    return mark.first() or 0


def _advance(model: str, below: int) -> None:
    """After a pass that found no message from id ``below`` on without a vector: marks
    the messages stored before ``CATCH_UP_GRACE`` as checked."""
    cutoff = timezone.now() - CATCH_UP_GRACE
    old = Message.objects.filter(id__gte=below, created_at__lt=cutoff)
    last = old.aggregate(last=Max("id"))["last"]
    if last is not None:
        EmbeddingCatchUp.objects.update_or_create(model=model, defaults={"below_id": last + 1})


def pending(*, conversation_id: str | None = None, limit: int) -> list[int]:
    """Ids of messages without a vector of the current model, oldest first (an import's
    oldest facts are the ones recent messages cannot stand in for): in one
    conversation (through its messages), or in all of them from the catch-up's mark on
    (``EmbeddingCatchUp``; through the primary key), not in the whole table."""
    model = embeddings.model_id()
    if model is None:
        return []
    done = MessageEmbedding.objects.filter(message=OuterRef("pk"), model=model)
    messages = Message.objects.filter(~Exists(done))
    if conversation_id is not None:
        messages = messages.filter(conversation_id=conversation_id)
    else:
        messages = messages.filter(id__gte=_checked_below(model))
    return list(messages.order_by("id").values_list("id", flat=True)[:limit])


def embed_pending(
    *, conversation_id: str | None = None, limit: int | None = None, batch: int = 256
) -> int:
    """Embeds messages that lack a vector of the current model, oldest first, in
    batches, until none is left or ``limit`` are done; a pass over all conversations
    that leaves none moves the catch-up's mark. Raises EmbeddingUnavailable."""
    model = embeddings.model_id()
    below = 0 if model is None else _checked_below(model)
    done = 0
    while limit is None or done < limit:
        size = batch if limit is None else min(batch, limit - done)
        ids = pending(conversation_id=conversation_id, limit=size)
        if not ids:
            if conversation_id is None and model is not None:
                _advance(model, below)
            break
        done += messages_embed(message_ids=ids)
    return done


# Within it, a search's calls below bring a conversation's vectors up to date once.
one_reading = vector_cache.one_reading


def similarities(
    *, conversation_id: str, query: np.ndarray, before_seq: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The cosine similarity of the query vector (of the current model) with every
    message of the conversation that has a vector of that model and ``seq < before_seq``:
    ``(seqs, similarities)`` in the order of ``seq``, from the vectors this process keeps
    (``conversations.vector_cache``), brought up to date first. Several queries (a matrix,
    one a row): a row of similarities each."""
    kept = vector_cache.CACHE.vectors(conversation_id, embeddings.model_id(), query.shape[-1])
    return kept.similarities(query, before_seq or NO_BOUND)


def vectors_of(*, conversation_id: str, seqs: list[int]) -> dict[int, np.ndarray]:
    """The unit vectors (current model) of those of ``seqs`` that have one, by seq, from
    the vectors this process keeps."""
    model = embeddings.model_id()
    if model is None or not seqs:
        return {}
    dimension = (
        MessageEmbedding.objects.filter(conversation_id=conversation_id, model=model)
        .values_list("dimension", flat=True)
        .first()
    )
    if dimension is None:
        return {}
    kept = vector_cache.CACHE.vectors(conversation_id, model, dimension)
    return kept.of(sorted(seqs))


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


RATE_WINDOW = timedelta(minutes=10)


def catch_up_progress(model: str) -> dict[str, float | int]:
    """For the admin: vectors of ``model`` stored per minute over the last
    ``RATE_WINDOW`` (the catch-up's and the chats'), and messages still without one from
    the catch-up's mark on."""
    since = timezone.now() - RATE_WINDOW
    recent = MessageEmbedding.objects.filter(model=model, created_at__gte=since).count()
    done = MessageEmbedding.objects.filter(message=OuterRef("pk"), model=model)
    waiting = Message.objects.filter(~Exists(done), id__gte=_checked_below(model)).count()
    return {"per_minute": round(recent / (RATE_WINDOW.total_seconds() / 60), 1), "waiting": waiting}
