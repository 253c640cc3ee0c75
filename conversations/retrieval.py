"""Finding a conversation's older messages by their words, by their meaning, or both, and
keeping only those that stand out as relevant.

* ``text``: full-text search (``conversations.search``).
* ``semantic``: embedding similarity (``conversations.vectors``) of the query and each
  message, with the model in use.
* ``hybrid`` (the default): both, fused by their ranks (weighted reciprocal rank
  fusion, ``weight / (RRF_K + rank)`` summed over the two rankings, the best
  ``CANDIDATES`` of each). A message without a vector yet (an import the catch-up has
  not reached, a message stored while the embedder was down) competes on its words: its
  text rank stands in for the similarity rank it does not have. (The weighted sum of
  scores used before gave a text-only hit at most 0.1, so any embedded message with a
  similarity above about 0.11 outranked it: after an import nothing was found by its
  words until the catch-up came.)

**The relevance floor.** A ranking always has a first place, even when nothing in the
history is about the question. A hit is kept only when it stands out:

* with a vector (``semantic``, ``hybrid``): its similarity is at least
  ``SIMILARITY_FLOOR`` and at least ``SIMILARITY_MARGIN`` above the conversation's
  background (the ``BACKGROUND_RANK``-th best similarity of the whole history), or it
  matches at least ``TEXT_SHARE`` of the query's terms and its similarity is at least
  the background and ``TEXT_SIMILARITY_FLOOR`` (words and meaning agree);
* without one, or in ``text`` mode: it matches at least ``TEXT_SHARE`` of the query's
  terms.

The values were chosen on the tuning half of ``bench/memory_abilities.py`` (the
held-out half is only measured). What the floor left out is returned in ``dropped``
with the reason, for the agent's step.

When the embedder is off or fails, ``semantic`` and ``hybrid`` run as ``text`` and say
why in ``fallback``: the search never fails because of the embedder.
"""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conversations import vectors
from conversations.models import Message
from conversations.search import search_messages, terms
from conversations.selectors import MESSAGE_FIELDS
from core import metrics
from gateway import embeddings

MODES = ("hybrid", "text", "semantic")
RRF_K = 10
# The meaning's ranking counts twice the words': a full-text match on a common word is
# likelier a false positive than the best similarity.
MEANING_WEIGHT = 1.0
TEXT_WEIGHT = 0.5
# How deep each ranking is read before fusing.
CANDIDATES = 30
SIMILARITY_FLOOR = 0.3
SIMILARITY_MARGIN = 0.12
TEXT_SIMILARITY_FLOOR = 0.3
BACKGROUND_RANK = 10
TEXT_SHARE = 0.5


@dataclass
class Found:
    rows: list[dict[str, Any]]
    mode: str  # the mode that ran
    fallback: str | None = None  # why it is not the mode asked for
    dropped: list[dict[str, Any]] = field(default_factory=list)  # left out by the floor


def _rows(conversation_id: str, seqs: list[int]) -> dict[int, dict[str, Any]]:
    rows = Message.objects.filter(conversation_id=conversation_id, seq__in=seqs).order_by()
    return {row["seq"]: row for row in rows.values(*MESSAGE_FIELDS)}


def _fuse(by_words: list[int], by_meaning: list[int], embedded: set[int]) -> dict[int, float]:
    """Weighted reciprocal rank fusion of the two rankings (best first). A message with
    no vector counts its text rank for the meaning too: it competes on its words as if
    its meaning ranked as they do."""
    scores: dict[int, float] = {}
    for rank, seq in enumerate(by_meaning, start=1):
        scores[seq] = MEANING_WEIGHT / (RRF_K + rank)
    for rank, seq in enumerate(by_words, start=1):
        stand_in = 0.0 if seq in embedded else MEANING_WEIGHT / (RRF_K + rank)
        scores[seq] = scores.get(seq, stand_in) + TEXT_WEIGHT / (RRF_K + rank)
    return scores


def _background(similarity: np.ndarray) -> float:
    """The similarity that an ordinary message of this history reaches."""
    if len(similarity) < BACKGROUND_RANK:
        return 0.0
    return float(np.partition(-similarity, BACKGROUND_RANK - 1)[BACKGROUND_RANK - 1] * -1)


def _matched_share(query_terms: list[str], content: str) -> float:
    lowered = content.lower()
    return sum(term in lowered for term in query_terms) / max(1, len(query_terms))


def _why_not(
    row: dict[str, Any], *, background: float, query_terms: list[str], in_text: bool
) -> str | None:
    """Why a hit is below the relevance floor, or None when it is relevant."""
    similarity = row.get("similarity")
    if similarity is None:
        share = _matched_share(query_terms, row["content"])
        if share >= TEXT_SHARE:
            return None
        return f"matches {share:.0%} of the query's words (floor {TEXT_SHARE:.0%}), no vector"
    needed = max(SIMILARITY_FLOOR, background + SIMILARITY_MARGIN)
    if similarity >= needed:
        return None
    share = _matched_share(query_terms, row["content"]) if in_text else 0.0
    if share >= TEXT_SHARE and similarity >= max(background, TEXT_SIMILARITY_FLOOR):
        return None
    return f"similarity {similarity:.2f} below the floor {needed:.2f}"


@metrics.RETRIEVAL_DURATION.time()
def find_messages(
    *,
    conversation_id: str,
    query: str,
    limit: int,
    before_seq: int | None = None,
    mode: str = "hybrid",
    floor: bool = True,
) -> Found:
    """The best relevant messages for ``query`` with ``seq < before_seq``, best first:
    dicts of seq, role, content, token_estimate, created_at, score (the fused score) and
    similarity (when the message has a vector of the model in use). ``floor=False``
    keeps the hits below the relevance floor too."""
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
            limit=max(limit, CANDIDATES),
            before_seq=before_seq,
        )
    by_meaning = [seq for seq, _ in vectors.best(seqs, similarity, CANDIDATES)]
    by_words = [row["seq"] for row in text]
    scores = _fuse(by_words, by_meaning, set(seqs[np.isin(seqs, by_words)].tolist()))
    ranked = sorted(scores, key=lambda seq: (scores[seq], seq), reverse=True)
    known = {row["seq"]: row for row in text}
    missing = [seq for seq in ranked[: 2 * limit] if seq not in known]
    known.update(_rows(conversation_id, missing) if missing else {})
    of = vectors.lookup(seqs, similarity, ranked)
    background = _background(similarity)
    query_terms = terms(query)
    worded = set(by_words)
    rows, dropped = [], []
    for seq in ranked:
        if len(rows) == limit or len(rows) + len(dropped) >= 2 * limit:
            break
        if seq not in known:  # deleted meanwhile
            continue
        row = {**known[seq], "score": round(scores[seq], 4)}
        if seq in of:
            row["similarity"] = round(of[seq], 4)
        why = _why_not(row, background=background, query_terms=query_terms, in_text=seq in worded)
        if why is not None and floor:
            dropped.append({"seq": seq, "reason": why})
            continue
        rows.append(row)
    return Found(rows, mode, fallback, dropped)
