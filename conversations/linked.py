"""Messages that a search's hits bring along: what they name, and what updated them.

The relevance floor (``conversations.retrieval``) judges each message alone against the
question. Some are relevant only through another message:

* **Names.** "When is my cousin's wedding?" is hardly like "My cousin is Rafael." nor like
  "Rafael is getting married in June." on its own, but both rank among the candidates, and
  they name the same rare name. A capitalised word that at least two of the best
  candidates have, and at most ``RARE`` messages of the conversation, is what the question
  is about: the messages naming it are kept. The best hits' rare names bring their messages too ("My
  sister is Ana." -> "Ana lives in Oslo."). A name in many messages (a colleague named all
  the time) narrows nothing down and is not followed.
* **Updates.** "I started a new job at Solaris Energy." is further from "Who is my
  employer?" than "I work at Nordlicht Bank.", yet it is the answer. A candidate that is
  one of the ``NEAREST`` messages in meaning to a kept hit among those said after it (at
  least ``NEIGHBOUR`` close, and at most ``QUESTION_MARGIN`` less similar to the question
  than the hit) is kept: it may say what changed.

Both are bounded: candidates are the fused ranking's first ``CANDIDATES``, names at most
``MAX_NAMES``.
"""

from collections import Counter
from collections.abc import Callable
from typing import Any

from conversations import entities, vectors

NEIGHBOUR = 0.35
NEAREST = 2  # the closest later messages of a hit that may be what changed it
# ... and about as close to the question as the hit is (at most this much less similar).
QUESTION_MARGIN = 0.2
NEIGHBOUR_HITS = 3  # the kept hits whose newer neighbours are looked for
NAME_HITS = 2  # the kept hits whose names are followed
MAX_NAMES = 3
MAX_TRIES = 6
NAME_CANDIDATES = 20  # the best candidates among which a shared name counts
RARE = 5

Row = dict[str, Any]


def shared_names(candidates: list[Row], query: str) -> list[str]:
    """Capitalised words that at least two of ``candidates`` have, most shared first."""
    counts: Counter[str] = Counter()
    for row in candidates:
        counts.update(entities.capitalised(row["content"], exclude=query))
    return [name for name, count in counts.most_common() if count >= 2]


def follow_names(
    names: list[str], search: Callable[[str, int], list[Row]], taken: set[int]
) -> tuple[list[Row], dict[int, str]]:
    """The messages naming each of ``names`` that only a few messages name (``search``:
    a name and a limit to its matches), those not ``taken`` yet; at most ``MAX_NAMES``
    names followed, ``MAX_TRIES`` looked up. Also: the name that reached each message
    (those taken already too)."""
    found: list[Row] = []
    reached: dict[int, str] = {}
    followed = 0
    for name in names[:MAX_TRIES]:
        if followed == MAX_NAMES:
            break
        hits = search(name, RARE + 1)
        if len(hits) > RARE:
            continue  # a common word: it narrows nothing down
        followed += 1
        for hit in sorted(hits, key=lambda row: row["seq"]):
            reached.setdefault(hit["seq"], name)
            if hit["seq"] not in taken:
                taken.add(hit["seq"])
                found.append({**hit, "via": name})
    return found, reached


def newer_neighbours(conversation_id: str, kept: list[Row], candidates: list[Row]) -> list[Row]:
    """Candidates that are, among the messages said after one of the best kept hits, the
    ``NEAREST`` closest to it in meaning (and at least ``NEIGHBOUR`` close)."""
    hits = kept[:NEIGHBOUR_HITS]
    by_seq = {row["seq"]: row for row in candidates}
    unit = vectors.vectors_of(conversation_id=conversation_id, seqs=[row["seq"] for row in hits])
    found: list[Row] = []
    for hit in hits:
        mine = unit.get(hit["seq"])
        if mine is None:
            continue
        seqs, similarity = vectors.similarities(
            conversation_id=conversation_id, query=mine, before_seq=None
        )
        later = seqs > hit["seq"]
        floor = (hit.get("similarity") or 0.0) - QUESTION_MARGIN
        for seq, score in vectors.best(seqs[later], similarity[later], NEAREST):
            row = by_seq.get(seq)
            if row is None or score < NEIGHBOUR or row.get("similarity", 0.0) < floor:
                continue
            found.append({**by_seq.pop(seq), "updates": hit["seq"]})
    return found
