"""Finding a conversation's older messages by their words, by their meaning, or both.

* ``text``: full-text search (``conversations.search``).
* ``semantic``: embedding similarity (``conversations.vectors``) of the query and each
  message, with the model in use.
* ``hybrid`` (the default): both, fused by a weighted sum of scores:
  ``TEXT_WEIGHT * text / best text + (1 - TEXT_WEIGHT) * cosine similarity``, over the
  best ``CANDIDATES`` of each ranking (a text match's similarity is read from the same
  vectors, so no candidate is scored as if it had none).

Why not reciprocal rank fusion: measured by ``bench/memory.py``'s facts in a 10,000-message
conversation, RRF (k = 60, or 10) put the fact first for 48% of the paraphrased questions
and 95% of those sharing words, because a message that both rankings list low (a full-text
false positive that is also vaguely similar) beats one that only the embedding ranks
first. The weighted sum with ``TEXT_WEIGHT`` 0.1 put it first for 93% and 100%
(0.3: 65% and 98%; embeddings alone: 95% and 100%, but they miss exact codes and names
that full text finds). Text scores are divided by the best one of the query, so the
weight does not depend on how rare the query's words are.

When the embedder is off or fails, ``semantic`` and ``hybrid`` run as ``text`` and say
why in ``fallback``: the search never fails because of the embedder.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from conversations import vectors
from conversations.models import Message
from conversations.search import search_messages
from conversations.selectors import MESSAGE_FIELDS
from core import metrics
from gateway import embeddings

MODES = ("hybrid", "text", "semantic")
TEXT_WEIGHT = 0.1
# How deep each ranking is read before fusing.
CANDIDATES = 30


@dataclass
class Found:
    rows: list[dict[str, Any]]
    mode: str  # the mode that ran
    fallback: str | None = None  # why it is not the mode asked for


def _rows(conversation_id: str, seqs: list[int]) -> dict[int, dict[str, Any]]:
    rows = Message.objects.filter(conversation_id=conversation_id, seq__in=seqs).order_by()
    return {row["seq"]: row for row in rows.values(*MESSAGE_FIELDS)}


def _fuse(text: list[dict[str, Any]], seqs: np.ndarray, similarity: np.ndarray) -> dict[int, float]:
    """Hybrid scores of the best candidates of both rankings (see the module docstring)."""
    of = vectors.lookup(seqs, similarity, [row["seq"] for row in text])
    top = max((row["score"] for row in text), default=0.0) or 1.0
    scores = {
        seq: (1 - TEXT_WEIGHT) * sim for seq, sim in vectors.best(seqs, similarity, CANDIDATES)
    }
    for row in text:
        seq = row["seq"]
        scores[seq] = TEXT_WEIGHT * row["score"] / top + (1 - TEXT_WEIGHT) * of.get(seq, 0.0)
    return scores


@metrics.RETRIEVAL_DURATION.time()
def find_messages(
    *,
    conversation_id: str,
    query: str,
    limit: int,
    before_seq: int | None = None,
    mode: str = "hybrid",
) -> Found:
    """The best messages for ``query`` with ``seq < before_seq``, best first: dicts of
    seq, role, content, token_estimate, created_at and score (plus similarity when the
    embeddings took part)."""
    fallback = None
    seqs = np.zeros(0, dtype=np.int64)
    similarity = np.zeros(0, dtype=np.float32)
    if mode != "text":
        try:
            seqs, similarity = vectors.similarities(
                conversation_id=conversation_id,
                query=embeddings.embed_query(query),
                before_seq=before_seq,
            )
        except embeddings.EmbeddingUnavailable as exc:
            fallback, mode = str(exc), "text"
    text: list[dict[str, Any]] = []
    if mode != "semantic":
        text = search_messages(
            conversation_id=conversation_id,
            query=query,
            limit=max(limit, CANDIDATES) if mode == "hybrid" else limit,
            before_seq=before_seq,
        )
    if mode == "text":
        return Found(text[:limit], mode, fallback)
    if mode == "semantic":
        scores = dict(vectors.best(seqs, similarity, limit))
    else:
        scores = _fuse(text, seqs, similarity)
    chosen = sorted(scores, key=lambda seq: (scores[seq], seq), reverse=True)[:limit]
    known = {row["seq"]: row for row in text}
    missing = [seq for seq in chosen if seq not in known]
    known.update(_rows(conversation_id, missing) if missing else {})
    of = vectors.lookup(seqs, similarity, chosen)
    rows = []
    for seq in chosen:
        if seq not in known:  # deleted meanwhile
            continue
        row = {**known[seq], "score": round(scores[seq], 4)}
        if seq in of:
            row["similarity"] = round(of[seq], 4)
        rows.append(row)
    return Found(rows, mode, fallback)
