"""The relevance floor of a search (``conversations.retrieval``).

A ranking always has a first place, even when nothing in the history is about the
question. A hit is kept only when it stands out:

* with a vector (``semantic``, ``hybrid``): its similarity is at least
  ``SIMILARITY_FLOOR`` and at least ``SIMILARITY_MARGIN`` above the conversation's
  background (the ``BACKGROUND_RANK``-th best similarity of the whole history), or it
  matches at least ``TEXT_SHARE`` of the query's terms and its similarity is at least
  the background and ``TEXT_SIMILARITY_FLOOR`` (words and meaning agree);
* without one, or in ``text`` mode: it matches at least ``TEXT_SHARE`` of the query's
  terms;
* the best match by meaning is kept (above ``SIMILARITY_FLOOR`` and half the margin
  above the background) when it is at least ``STANDOUT`` more similar than every other
  message: one message that stands out;
* and in any case, a hit more than ``BEHIND_BEST`` less similar than the best match by
  meaning is about something else ("My tennis coach is Ingrid.", 0.34, beside "My boss is
  called Heather.", 0.60, for "What is my boss's husband called?" would bring Ingrid's
  messages along), unless it is the first hit by words and has ``TEXT_SHARE`` of the
  question's terms (words and meaning agree), or it is said by the best match's speaker
  about the same: after it and close to it in meaning, it may say what changed
  ("Honestly, Nakamura Ramen has become my favourite restaurant.", 0.47, after "My
  favourite restaurant is Bistro Lumière.", 0.61, for "Which restaurant do I like
  best?"); before it and closer still, it is what the best may have changed (the agent
  marks the newer as the most recent).

The values were chosen on the tuning half of ``bench/memory_abilities.py`` (the
held-out half is only measured). What the floor left out is returned in ``dropped``
with the reason, for the agent's step.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SIMILARITY_FLOOR = 0.3
SIMILARITY_MARGIN = 0.12
TEXT_SIMILARITY_FLOOR = 0.3
BACKGROUND_RANK = 10
# A best match by meaning this much above every other message is kept below the floor.
STANDOUT = 0.03
TEXT_SHARE = 0.5
BEHIND_BEST = 0.1

Row = dict[str, Any]


@dataclass
class Floor:
    background: float
    query_terms: list[str]
    worded: set[int]
    related: dict[str, list[str]]
    on: bool
    standout: float = 0.0
    best: float = 0.0  # the best similarity of the history
    first_worded: int | None = None  # the first hit by words
    # Whether a message is said by the best match's speaker, after it and close to it in
    # meaning, or before it and closer still.
    beside_best: Callable[[int], bool] = lambda seq: False


def background(similarity: np.ndarray) -> float:
    """The similarity that an ordinary message of this history reaches."""
    if len(similarity) < BACKGROUND_RANK:
        return 0.0
    return float(np.partition(-similarity, BACKGROUND_RANK - 1)[BACKGROUND_RANK - 1] * -1)


def standout(similarity: np.ndarray) -> float:
    """The best similarity when it exceeds the second best by ``STANDOUT``, else 0."""
    if len(similarity) < 2:
        return 0.0
    first, second = -np.partition(-similarity, 1)[:2]
    return float(first) if first - second >= STANDOUT else 0.0


def best(similarity: np.ndarray) -> float:
    """The best similarity of the history (0 when nothing has a vector)."""
    return float(similarity.max()) if len(similarity) else 0.0


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


def _behind(row: Row, floor: Floor) -> bool:
    """Whether ``row`` is more than ``BEHIND_BEST`` less similar than the best match and
    neither the first hit by words (with ``TEXT_SHARE`` of the question's terms) nor one
    said by the best match's speaker about the same."""
    if floor.best - row.get("similarity", floor.best) <= BEHIND_BEST:
        return False
    worded = row["seq"] == floor.first_worded
    if worded and _matched_share(floor.query_terms, row["content"]) >= TEXT_SHARE:
        return False
    return not floor.beside_best(row["seq"])


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
        )
        if why is None and _behind(row, floor):
            why = f"similarity {row['similarity']:.2f} more than {BEHIND_BEST} below the best"
        if why is not None and floor.on:
            dropped.append({"seq": seq, "reason": why})
            continue
        rows.append(row)
    return rows, dropped
