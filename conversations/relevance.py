"""The relevance floor of a search (``conversations.retrieval``).

A ranking always has a first place, even when nothing in the history is about the
question. A hit is kept only when it stands out:

* with a vector (``semantic``, ``hybrid``): its similarity is at least
  ``SIMILARITY_FLOOR`` and at least ``SIMILARITY_MARGIN`` above the conversation's
  background, or it matches at least ``TEXT_SHARE`` of the query's terms and its
  similarity is at least the background and ``TEXT_SIMILARITY_FLOOR`` (words and meaning
  agree). The background is what ordinary messages of this history reach: the
  ``BACKGROUND_RANK``-th best similarity, and (when most messages have a vector) at
  least ``BACKGROUND_SPREAD`` standard deviations above the mean similarity. The rank
  alone made the floor lenient in a short history (the 10th best of 200 messages is an
  ordinary one, of 2,000 a rare one): at 200 messages a question about something never
  said brought in 3 to 4 hits and their partners where at 2,000 it brought none;
* without one, or in ``text`` mode: it matches at least ``TEXT_SHARE`` of the query's
  terms;
* the best match by meaning is kept (above ``SIMILARITY_FLOOR`` and the background)
  when it is at least ``STANDOUT`` more similar than every other message: one message
  that stands out. Its lead over the second counts for the margin (half the margin at
  least): a message far ahead of all the others needs less above the background;
* when nothing else is kept, the first of the fused ranking is kept when it is also the
  best match by meaning, at least ``LONE_FLOOR`` similar and above the background
  (:func:`lone`): in a long history the messages most like a paraphrased question are
  about as like it as ordinary ones (the background), yet the best of them by words
  and meaning at once is most often its answer. It is kept alone: the search brings
  nothing along for it (``conversations.linked``), so a question about something never
  said adds at most that message and its partner.

The values were chosen on the tuning half of ``bench/memory_abilities.py`` (the
held-out half is only measured). What the floor left out is returned in ``dropped``
with the reason, for the agent's step.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

SIMILARITY_FLOOR = 0.3
SIMILARITY_MARGIN = 0.12
TEXT_SIMILARITY_FLOOR = 0.3
BACKGROUND_RANK = 10
BACKGROUND_SPREAD = 2.7
COVERED = 0.5
LONE_FLOOR = 0.42
# A best match by meaning this much above every other message is kept below the floor.
STANDOUT = 0.03
TEXT_SHARE = 0.5

Row = dict[str, Any]


@dataclass
class Floor:
    background: float
    query_terms: list[str]
    worded: set[int]
    related: dict[str, list[str]]
    on: bool
    standout: float = 0.0
    lead: float = 0.0


def ranked_background(similarity: np.ndarray) -> float:
    """The ``BACKGROUND_RANK``-th best similarity (0 in a shorter history)."""
    if len(similarity) < BACKGROUND_RANK:
        return 0.0
    return float(np.partition(-similarity, BACKGROUND_RANK - 1)[BACKGROUND_RANK - 1] * -1)


def background(similarity: np.ndarray, history: int) -> float:
    """The similarity that an ordinary message of this history (``history`` messages)
    reaches: the ``BACKGROUND_RANK``-th best, and, when at least ``COVERED`` of the
    messages have a vector, ``BACKGROUND_SPREAD`` standard deviations above the mean (the
    vectors made on the spot for hits by words are no sample of the history)."""
    if len(similarity) < BACKGROUND_RANK:
        return 0.0
    if len(similarity) < COVERED * history:
        return ranked_background(similarity)
    spread = float(similarity.mean() + BACKGROUND_SPREAD * similarity.std())
    return max(ranked_background(similarity), spread)


def standout(similarity: np.ndarray) -> tuple[float, float]:
    """The best similarity and its lead over the second best when the lead is at least
    ``STANDOUT``, else (0, 0)."""
    if len(similarity) < 2:
        return 0.0, 0.0
    first, second = -np.partition(-similarity, 1)[:2]
    return (float(first), float(first - second)) if first - second >= STANDOUT else (0.0, 0.0)


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
    lead: float = 0.0,
) -> str | None:
    """Why a hit is below the relevance floor, or None when it is relevant. ``standout``:
    the similarity the best match by meaning has when it exceeds every other by at least
    ``STANDOUT`` (0 otherwise), by ``lead``."""
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
    # Its lead counts for the margin, half the margin at least, the background at most.
    rest = max(0.0, SIMILARITY_MARGIN - max(SIMILARITY_MARGIN / 2, lead))
    if stands_out and similarity >= max(SIMILARITY_FLOOR, background + rest):
        return None  # the one message that stands out from all the others
    share = _matched_share(query_terms, row["content"]) if in_text else 0.0
    if share >= TEXT_SHARE and similarity >= max(background, TEXT_SIMILARITY_FLOOR):
        return None
    return f"similarity {similarity:.2f} below the floor {needed:.2f}"


def kept(
    ranked: list[int],
    known: dict[int, dict[str, Any]],
    scores: dict[int, float],
    similarity_of: dict[int, float],
    floor: Floor,
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
            lead=floor.lead,
        )
        if why is not None and floor.on:
            dropped.append({"seq": seq, "reason": why})
            continue
        rows.append(row)
    return rows, dropped


def lone(
    ranked: list[int], best_by_meaning: int | None, similarity_of: dict[int, float], floor: Floor
) -> int | None:
    """The seq of the first of the fused ranking when it is the best match by meaning
    too, at least ``LONE_FLOOR`` similar and above the background (to keep when nothing
    else is kept); else None."""
    if not floor.on or not ranked or ranked[0] != best_by_meaning:
        return None
    similarity = similarity_of.get(ranked[0])
    if similarity is None or similarity < max(LONE_FLOOR, floor.background):
        return None
    return ranked[0]
