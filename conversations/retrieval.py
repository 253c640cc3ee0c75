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
  terms;
* the best match by meaning is kept (above ``SIMILARITY_FLOOR`` and half the margin
  above the background) when it is at least ``STANDOUT`` more similar than every other
  message: one message that stands out.

The values were chosen on the tuning half of ``bench/memory_abilities.py`` (the
held-out half is only measured). What the floor left out is returned in ``dropped``
with the reason, for the agent's step.

**Messages without a vector yet** (an import the catch-up has not reached): the words
of the question bring words of theirs related in meaning (``conversations.vectors_words``:
"vehicle" finds "car"), and the best ``ON_THE_SPOT`` hits by words that lack a vector are
embedded during the search and stored, so that they are judged by their meaning like the
others.

**What hits bring along** (``conversations.linked``): the messages naming a rare name
that two of the best candidates share or that a best hit names, and a candidate said
after a kept hit that is among the closest to it in meaning (it may say what changed).
Each brought row says why: ``via`` (the name) or ``updates`` (the hit's seq).

When the embedder is off or fails, ``semantic`` and ``hybrid`` run as ``text`` and say
why in ``fallback``: the search never fails because of the embedder.
"""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conversations import entities, linked, vectors, vectors_words
from conversations.models import Message
from conversations.search import NO_BOUND, search_messages, terms
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
# A best match by meaning this much above every other message is kept below the floor.
STANDOUT = 0.07
TEXT_SHARE = 0.5
# Hits by words without a vector that are embedded during the search (:func:`_embed_found`).
ON_THE_SPOT = 12


@dataclass
class _Floor:
    background: float
    query_terms: list[str]
    worded: set[int]
    related: dict[str, list[str]]
    on: bool
    standout: float = 0.0


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


def _standout(similarity: np.ndarray) -> float:
    """The best similarity when it exceeds the second best by ``STANDOUT``, else 0."""
    if len(similarity) < 2:
        return 0.0
    first, second = -np.partition(-similarity, 1)[:2]
    return float(first) if first - second >= STANDOUT else 0.0


def _matched_share(
    query_terms: list[str], content: str, related: dict[str, list[str]] | None = None
) -> float:
    """The share of the query's terms that ``content`` has (or a word related to one)."""
    lowered = content.lower()
    related = related or {}
    matched = sum(
        any(word in lowered for word in (term, *related.get(term, ()))) for term in query_terms
    )
    return matched / max(1, len(query_terms))


def _why_not(
    row: dict[str, Any],
    *,
    background: float,
    query_terms: list[str],
    in_text: bool,
    related: dict[str, list[str]],
    standout: float = 0.0,
) -> str | None:
    """Why a hit is below the relevance floor, or None when it is relevant. ``standout``:
    the similarity the best match by meaning has when it exceeds every other by at least
    ``STANDOUT`` (0 otherwise)."""
    similarity = row.get("similarity")
    if similarity is None:
        share = _matched_share(query_terms, row["content"], related)
        if share >= TEXT_SHARE:
            return None
        return f"matches {share:.0%} of the query's words (floor {TEXT_SHARE:.0%}), no vector"
    needed = max(SIMILARITY_FLOOR, background + SIMILARITY_MARGIN)
    if similarity >= needed:
        return None
    stands_out = standout and similarity >= standout - 1e-4  # rows hold it rounded
    if stands_out and similarity >= max(SIMILARITY_FLOOR, background + SIMILARITY_MARGIN / 2):
        return None  # the one message that stands out from all the others
    share = _matched_share(query_terms, row["content"]) if in_text else 0.0
    if share >= TEXT_SHARE and similarity >= max(background, TEXT_SIMILARITY_FLOOR):
        return None
    return f"similarity {similarity:.2f} below the floor {needed:.2f}"


def _kept(
    ranked: list[int],
    known: dict[int, dict[str, Any]],
    scores: dict[int, float],
    similarity_of: dict[int, float],
    floor: _Floor,
    limit: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The hits above the relevance floor, best first (at most ``limit``), and those it
    left out with the reason."""
    rows: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for seq in ranked:
        if len(rows) == limit or len(rows) + len(dropped) >= 2 * limit:
            break
        if seq not in known:  # deleted meanwhile
            continue
        row = {**known[seq], "score": round(scores[seq], 4)}
        if seq in similarity_of:
            row["similarity"] = round(similarity_of[seq], 4)
        why = _why_not(
            row,
            background=floor.background,
            query_terms=floor.query_terms,
            in_text=seq in floor.worded,
            related=floor.related,
            standout=floor.standout,
        )
        if why is not None and floor.on:
            dropped.append({"seq": seq, "reason": why})
            continue
        rows.append(row)
    return rows, dropped


def _linked(
    rows: list[dict[str, Any]],
    ranked: list[int],
    known: dict[int, dict[str, Any]],
    similarity_of: dict[int, float],
    *,
    conversation_id: str,
    query: str,
    before_seq: int | None,
) -> list[dict[str, Any]]:
    """The hits with what they bring along (``conversations.linked``): after the best
    ``linked.NAME_HITS``, the messages that name a rare name of theirs or one that two of
    the best candidates share, then newer messages close to a kept hit, then the rest."""
    taken = {row["seq"] for row in rows}
    wanted = [seq for seq in ranked[:CANDIDATES] if seq not in taken]
    missing = [seq for seq in wanted if seq not in known]
    known.update(_rows(conversation_id, missing) if missing else {})
    candidates = [
        {
            **known[seq],
            **({"similarity": round(similarity_of[seq], 4)} if seq in similarity_of else {}),
        }
        for seq in wanted
        if seq in known
    ]
    newer = linked.newer_neighbours(conversation_id, rows, candidates) if rows else []
    taken.update(row["seq"] for row in newer)
    names = linked.shared_names((rows + candidates)[: linked.NAME_CANDIDATES], query)
    for row in rows[: linked.NAME_HITS]:
        for name in entities.names([row["content"]], exclude=query):
            if name not in names:
                names.append(name)

    def search(name: str, limit: int) -> list[dict[str, Any]]:
        return search_messages(
            conversation_id=conversation_id, query=name, limit=limit, before_seq=before_seq
        )

    named, reached = linked.follow_names(names, search, taken)
    for row in rows:  # a hit that a name reached too says so, unless it gave the name
        name = reached.get(row["seq"])
        if name and name not in entities.names([row["content"]]):
            row["via"] = name
    head = rows[: linked.NAME_HITS]
    return head + named + newer + rows[linked.NAME_HITS :]


def _embed_found(
    conversation_id: str,
    text: list[dict[str, Any]],
    seqs: np.ndarray,
    similarity: np.ndarray,
    query: str,
) -> tuple[np.ndarray, np.ndarray]:
    """The similarities with those of the best ``ON_THE_SPOT`` hits by words that had no
    vector added: they are embedded now (and stored, so the catch-up skips them), so
    that a message the catch-up has not reached is judged by its meaning like the others,
    not by its words alone."""
    have = set(seqs.tolist())
    lacking = [row["seq"] for row in text[:ON_THE_SPOT] if row["seq"] not in have]
    if not lacking:
        return seqs, similarity
    try:
        vectors.messages_embed_at(conversation_id=conversation_id, seqs=lacking)
        query_vector = embeddings.embed_query(query)
    except embeddings.EmbeddingUnavailable:
        return seqs, similarity
    unit = vectors.vectors_of(conversation_id=conversation_id, seqs=lacking)
    added = sorted(unit)
    if not added:
        return seqs, similarity
    extra = np.array([float(unit[seq] @ query_vector) for seq in added], dtype=np.float32)
    merged = np.concatenate([seqs, np.array(added, dtype=seqs.dtype)])
    order = np.argsort(merged, kind="stable")
    return merged[order], np.concatenate([similarity, extra])[order]


def _without_vector(conversation_id: str, before_seq: int | None, embedded: int) -> bool:
    """Whether some messages below ``before_seq`` have no vector of the model in use."""
    below = Message.objects.filter(conversation_id=conversation_id)
    if before_seq is not None:
        below = below.filter(seq__lt=before_seq)
    return below.count() > embedded


def _related(query: str, conversation_id: str, before_seq: int | None) -> dict[str, list[str]]:
    """Words of the unembedded messages related to the query's (``vectors_words``)."""
    try:
        return vectors_words.related(
            terms(query), conversation_id=conversation_id, before_seq=before_seq or NO_BOUND
        )
    except embeddings.EmbeddingUnavailable:
        return {}


@metrics.RETRIEVAL_DURATION.time()
def _similarities(
    conversation_id: str, query: str, before_seq: int | None, mode: str
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """The conversation's seqs with a vector and their similarities to ``query`` (none in
    ``text`` mode), and why the search falls back to words when the embedder is away."""
    empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if mode == "text":
        return *empty, None
    try:
        seqs, similarity = vectors.similarities(
            conversation_id=conversation_id,
            query=embeddings.embed_query(query),
            before_seq=before_seq,
        )
    except embeddings.EmbeddingUnavailable as exc:
        return *empty, str(exc)
    return seqs, similarity, None


def find_messages(
    *,
    conversation_id: str,
    query: str,
    limit: int,
    before_seq: int | None = None,
    mode: str = "hybrid",
    floor: bool = True,
    expand: bool = True,
) -> Found:
    """The best relevant messages for ``query`` with ``seq < before_seq``, best first:
    dicts of seq, role, content, token_estimate, created_at, score (the fused score) and
    similarity (when the message has a vector of the model in use). ``floor=False``
    keeps the hits below the relevance floor too; ``expand``: the hits bring the
    messages linked to them (:func:`_linked`)."""
    expand = expand and mode != "text"  # a search for a name is not expanded again
    seqs, similarity, fallback = _similarities(conversation_id, query, before_seq, mode)
    if fallback is not None:
        mode = "text"
    related: dict[str, list[str]] = {}
    if mode == "hybrid" and _without_vector(conversation_id, before_seq, len(seqs)):
        related = _related(query, conversation_id, before_seq)
    text: list[dict[str, Any]] = []
    if mode != "semantic":
        text = search_messages(
            conversation_id=conversation_id,
            query=query,
            limit=max(limit, CANDIDATES),
            before_seq=before_seq,
            also=[word for words in related.values() for word in words],
        )
    if mode == "hybrid" and text:
        seqs, similarity = _embed_found(conversation_id, text, seqs, similarity, query)
    by_meaning = [seq for seq, _ in vectors.best(seqs, similarity, CANDIDATES)]
    by_words = [row["seq"] for row in text]
    scores = _fuse(by_words, by_meaning, set(seqs[np.isin(seqs, by_words)].tolist()))
    ranked = sorted(scores, key=lambda seq: (scores[seq], seq), reverse=True)
    known = {row["seq"]: row for row in text}
    missing = [seq for seq in ranked[: 2 * limit] if seq not in known]
    known.update(_rows(conversation_id, missing) if missing else {})
    floor_of = _Floor(
        background=_background(similarity),
        standout=_standout(similarity),
        query_terms=terms(query),
        worded=set(by_words),
        related=related,
        on=floor,
    )
    similarity_of = vectors.lookup(seqs, similarity, ranked)
    rows, dropped = _kept(ranked, known, scores, similarity_of, floor_of, limit)
    if expand:
        rows = _linked(rows, ranked, known, similarity_of, conversation_id=conversation_id,
                       query=query, before_seq=before_seq)  # fmt: skip
        taken = {row["seq"] for row in rows}
        dropped = [entry for entry in dropped if entry["seq"] not in taken]
    return Found(rows, mode, fallback, dropped)
