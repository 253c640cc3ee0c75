"""Messages that a search's hits bring along: what they name, and what updated them.

The relevance floor (``conversations.retrieval``) judges each message alone against the
question. Some are relevant only through another message:

* **A name's messages read together.** "When should I send a card to my sister and to
  which city?" is hardly like any of "My sister is Ana.", "Ana's birthday is 3 May." and
  "Ana lives in Oslo." alone (each is below the relevance floor), but it is like the three
  read as one text. A capitalised word of one of the best ``CLUSTER_CANDIDATES``
  candidates by meaning and by words (kept or not) that at most ``RARE`` messages have,
  and whose messages joined are at least ``CLUSTER_MARGIN`` more similar to the question
  than the conversation's background and at least ``CLUSTER_GAIN`` more than the most
  similar of them alone, is what the question is about: its messages are kept. Facts
  about someone else ("My cousin is Rafael.", "Rafael is getting married in June." for
  "What's my uncle called?") read together are no more like the question than alone.
* **The best hits' names.** The rare names of the best ``NAME_HITS`` kept hits bring their
  messages ("I'm reading Middlemarch." -> "I finished Middlemarch and started The
  Overstory."), unless those messages read together are more than ``NAME_LOSS`` less like
  the question than the best of them alone (they are about something else). A name in
  many messages (a colleague named all the time) narrows nothing down and is not followed.
* **Updates.** "I started a new job at Solaris Energy." is further from "Who is my
  employer?" than "I work at Nordlicht Bank.", yet it is the answer. Of the messages said
  after a kept hit, the ``NEAREST`` closest to it in meaning may say what changed, when
  they stand out from the others said after it (at least ``STANDS_OUT`` closer than the
  next one: not one of many lines alike), said by the hit's speaker: a candidate at least
  ``NEIGHBOUR`` close and at most ``QUESTION_MARGIN`` less similar to the question than
  the hit, or one that tells a change in so many words and names no name of the hit
  (``outdated.tells_change``: "The council moved us to beach hut 61 ...", 0.42 close to
  "Our beach hut at Southwold is number 23.", 0.28 less like the question; but not
  "Casimir moved to Gdansk." after "Casimir repairs old motorbikes."), or any message at
  least ``SAME_THING`` close, however unlike the question it reads ("We've stopped going
  to the market; a veg box from Hilltop Farm arrives every Friday now." is 0.19 similar to
  "Where do our vegetables come from?", 0.54 close to "We get our vegetables from the
  Saturday market.").

All are bounded: candidates are the fused ranking's first ``CANDIDATES``, names followed
at most ``MAX_NAMES`` (``MAX_TRIES`` looked up), names tried as a whole at most
``CLUSTER_TRIES`` (an embedding of each name's messages, joined and alone, through the
per-process cache of texts).
"""

from collections.abc import Callable
from typing import Any

import numpy as np

from conversations import entities, vectors
from conversations.outdated import tells_change
from gateway import embeddings

NEIGHBOUR = 0.35
NEAREST = 2  # the closest later messages of a hit that may be what changed it
# ... and about as close to the question as the hit is (at most this much less similar).
QUESTION_MARGIN = 0.2
# ... or this close to the hit, however unlike the question; either way this much closer
# to the hit than the next message said after it.
SAME_THING = 0.5
STANDS_OUT = 0.05
NEIGHBOUR_HITS = 3  # the kept hits whose newer neighbours are looked for
NAME_HITS = 2  # the kept hits whose names are followed
MAX_NAMES = 3
MAX_TRIES = 6
RARE = 5
CLUSTER_CANDIDATES = 12
CLUSTER_TRIES = 10
CLUSTER_MARGIN = 0.02
CLUSTER_GAIN = 0.05
NAME_LOSS = 0.2

Row = dict[str, Any]
Search = Callable[[str, int], list[Row]]


def joined_similarity(hits: list[Row], query_vector: np.ndarray) -> tuple[float, float]:
    """How similar to the question ``hits`` are read as one text, in conversation order,
    and the most similar of them alone. Raises EmbeddingUnavailable."""
    texts = [hit["content"] for hit in sorted(hits, key=lambda row: row["seq"])]
    joined, *alone = embeddings.embed_kept([" ".join(texts), *texts])
    return float(joined @ query_vector), max(float(vector @ query_vector) for vector in alone)


def follow_names(
    names: list[str], search: Search, taken: set[int], query_vector: np.ndarray | None = None
) -> tuple[list[Row], dict[int, str]]:
    """The messages naming each of ``names`` that only a few messages name (``search``:
    a name and a limit to its matches), those not ``taken`` yet; at most ``MAX_NAMES``
    names followed, ``MAX_TRIES`` looked up. With the question's vector, a name whose
    messages read together are more than ``NAME_LOSS`` less like the question than the
    best of them alone is not followed (they are about something else). Also: the name
    that reached each message (those taken already too)."""
    found: list[Row] = []
    reached: dict[int, str] = {}
    followed = 0
    for name in names[:MAX_TRIES]:
        if followed == MAX_NAMES:
            break
        hits = search(name, RARE + 1)
        if len(hits) > RARE:
            continue  # a common word: it narrows nothing down
        if query_vector is not None and len(hits) > 1:
            joined, alone = joined_similarity(hits, query_vector)
            if joined < alone - NAME_LOSS:
                continue
        followed += 1
        for hit in sorted(hits, key=lambda row: row["seq"]):
            reached.setdefault(hit["seq"], name)
            if hit["seq"] not in taken:
                taken.add(hit["seq"])
                found.append({**hit, "via": name})
    return found, reached


def newer_neighbours(
    conversation_id: str,
    kept: list[Row],
    candidates: list[Row],
    before_seq: int | None = None,
    row_at: Callable[[int], Row | None] = lambda seq: None,
) -> list[Row]:
    """Messages that are, among those said after one of the best kept hits (and before
    ``before_seq``), the ``NEAREST`` closest to it in meaning and stand out from the
    others (see the module docstring): candidates, or messages ``row_at`` reads (with
    their similarity to the question, when they have one). A kept hit that is one of them
    gets ``updates`` too."""
    hits = kept[:NEIGHBOUR_HITS]
    by_seq = {row["seq"]: row for row in candidates}
    taken = {row["seq"]: row for row in kept}
    unit = vectors.vectors_of(conversation_id=conversation_id, seqs=[row["seq"] for row in hits])
    found: list[Row] = []
    for hit in hits:
        mine = unit.get(hit["seq"])
        if mine is None:
            continue
        seqs, similarity = vectors.similarities(
            conversation_id=conversation_id, query=mine, before_seq=before_seq
        )
        later = seqs > hit["seq"]
        nearest = _distinct(vectors.best(seqs[later], similarity[later], 2 * NEAREST + 2))
        crowd = nearest[NEAREST][1] if len(nearest) > NEAREST else 0.0
        floor = (hit.get("similarity") or 0.0) - QUESTION_MARGIN
        for seq, score in nearest[:NEAREST]:
            if score < max(NEIGHBOUR, crowd + STANDS_OUT):
                continue
            if seq in taken:  # a kept hit that may update it says so too
                if _may_update(hit, taken[seq], score, floor):
                    taken[seq].setdefault("updates", hit["seq"])
                continue
            row = by_seq.pop(seq, None) or (row_at(seq) if score >= SAME_THING else None)
            if row is None or not _may_update(hit, row, score, floor):
                continue
            taken[seq] = {**row, "updates": hit["seq"]}
            found.append(taken[seq])
    return found


def _distinct(nearest: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """``nearest`` (best first) with one message of each text: the same text said again
    has the same similarity (the newest is kept)."""
    by_score: dict[float, tuple[int, float]] = {}
    for seq, score in nearest:
        key = round(score, 6)
        if key not in by_score or seq > by_score[key][0]:
            by_score[key] = (seq, score)
    return sorted(by_score.values(), key=lambda pair: -pair[1])


def _may_update(hit: Row, row: Row, closeness: float, floor: float) -> bool:
    """Whether ``row``, said after ``hit`` and ``closeness`` close to it, may say what
    changed: said by the same speaker (a filler reply of the assistant's 0.34 close to "We
    bought the sofa at IKEA." says nothing of what the user bought), not about someone else
    (it opens with a name the hit does not have: "Ingrid is vegetarian." after "I'm
    vegetarian."), and telling a change (naming no name of the hit: "Casimir moved to
    Gdansk." changes nothing of "Casimir repairs old motorbikes."), or about as similar to
    the question (``floor``), or at least ``SAME_THING`` close."""
    words = entities.capitalised(row["content"])
    opens = words and row["content"].startswith(words[0])
    if opens and words[0].lower() not in hit["content"].lower():
        return False
    if row["role"] != hit["role"]:
        return False
    # Of one named person, a change told may be of something else of theirs.
    if tells_change(row["content"]) and not set(words) & set(entities.capitalised(hit["content"])):
        return True
    return row.get("similarity", 0.0) >= floor or closeness >= SAME_THING


def clustered_names(
    candidates: list[Row],
    query: str,
    query_vector: np.ndarray,
    background: float,
    search: Search,
) -> list[str]:
    """The rare names of ``candidates`` (best first) whose messages, read as one text, are
    more like the question than any of them alone (see the module docstring)."""
    tried: list[str] = []
    for row in candidates[:CLUSTER_CANDIDATES]:
        for name in entities.capitalised(row["content"], exclude=query):
            if name not in tried:
                tried.append(name)
    found: list[str] = []
    for name in tried[:CLUSTER_TRIES]:
        hits = search(name, RARE + 1)
        if not 2 <= len(hits) <= RARE:
            continue  # one message is judged alone; a common word narrows nothing down
        joined, alone = joined_similarity(hits, query_vector)
        if joined >= background + CLUSTER_MARGIN and joined >= alone + CLUSTER_GAIN:
            found.append(name)
    return found
