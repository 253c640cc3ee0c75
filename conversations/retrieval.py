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

**The relevance floor** (``conversations.relevance``): a hit is kept only when it stands
out from the conversation's background; what the floor left out is returned in
``dropped`` with the reason, for the agent's step.

**Messages without a vector yet** (an import the catch-up has not reached): the words
of the question bring words of theirs related in meaning (``conversations.vectors_words``:
"vehicle" finds "car"), and the best ``ON_THE_SPOT`` hits by words that lack a vector are
embedded during the search and stored, so that they are judged by their meaning like the
others.

**What hits bring along** (``conversations.linked``): the messages naming a rare name
whose messages read together fit the question, or that a best hit names, and a
candidate said after a kept hit that is among the closest to it in meaning (it may say
what changed). Each brought row says why: ``via`` (the name) or ``updates`` (the hit's
seq).

When the embedder is off or fails, ``semantic`` and ``hybrid`` run as ``text`` and say
why in ``fallback``: the search never fails because of the embedder.
"""

from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

import numpy as np
from django.db.models import Q

from conversations import entities, linked, relevance, subjects, vectors, vectors_words
from conversations.models import Message
from conversations.search import NO_BOUND, search_messages, search_rare, terms
from conversations.selectors import MESSAGE_FIELDS
from core import metrics
from gateway import embeddings

MODES = ("hybrid", "text", "semantic")
Row = dict[str, Any]
RRF_K = 10
# The meaning's ranking counts twice the words': a full-text match on a common word is
# likelier a false positive than the best similarity.
MEANING_WEIGHT = 1.0
TEXT_WEIGHT = 0.5
# How deep each ranking is read before fusing.
CANDIDATES = 30
# Hits by words without a vector that are embedded during the search (:func:`_embed_found`).
ON_THE_SPOT = 12
# More seqs than this missing between a conversation's first and last vector (messages
# stored while the embedder was down): they are counted, not asked for one by one.
MAX_SKIPPED = 1000


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


@dataclass
class _Search:
    """What one search gathered: the query's vector (None in ``text`` mode), the
    similarity of every message with a vector, the full-text hits."""

    conversation_id: str
    query: str
    before_seq: int | None
    mode: str
    fallback: str | None = None
    query_vector: np.ndarray | None = None
    seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    text: list[dict[str, Any]] = field(default_factory=list)
    related: dict[str, list[str]] = field(default_factory=dict)

    names: dict[tuple[str, int], list[Row]] = field(default_factory=dict)

    def by_name(self, name: str, limit: int) -> list[Row]:
        """The messages naming ``name`` (a second search, by its words; once); ``limit``
        of their seqs alone when ``limit`` or more do (``search.search_rare``)."""
        if (name, limit) not in self.names:
            self.names[(name, limit)] = search_rare(
                conversation_id=self.conversation_id, query=name, limit=limit,
                before_seq=self.before_seq,
            )  # fmt: skip
        return self.names[(name, limit)]


def _names(search: _Search, rows: list[Row], best: list[Row]) -> list[str]:
    """The names to follow: those whose messages read together fit the question (tried
    already, so first), then those of the best hits (``linked``); ``best``: the first by
    meaning and by words, kept or not."""
    names: list[str] = []
    if search.query_vector is not None:
        background = relevance.background(search.similarity)
        names = linked.clustered_names(
            best, search.query, search.query_vector, background, search.by_name
        )
    contents = [row["content"] for row in rows[: linked.NAME_HITS]]
    # Names inside a sentence first, then capitalised words that open one ("Kwame plays the
    # saxophone."): a word that many messages have is not followed (``linked.RARE``).
    found = entities.names(contents, exclude=search.query)
    found += [w for c in contents for w in entities.capitalised(c, exclude=search.query)]
    return list(dict.fromkeys([*names, *found]))


def _best_each(search: _Search, known: dict[int, Row]) -> list[Row]:
    """The best ``linked.CLUSTER_CANDIDATES`` by meaning and by words, taken in turn,
    kept or not: a hit by words alone ranks low in the fused ranking."""
    by_meaning = [seq for seq, _ in vectors.best(search.seqs, search.similarity, CANDIDATES)]
    by_words = [row["seq"] for row in search.text]
    turns = [seq for pair in zip_longest(by_meaning, by_words) for seq in pair if seq]
    wanted = list(dict.fromkeys(turns))[: linked.CLUSTER_CANDIDATES]
    missing = [seq for seq in wanted if seq not in known]
    known.update(_rows(search.conversation_id, missing) if missing else {})
    return [known[seq] for seq in wanted if seq in known]


def _linked(
    search: _Search,
    rows: list[dict[str, Any]],
    ranked: list[int],
    known: dict[int, dict[str, Any]],
    similarity_of: dict[int, float],
) -> list[dict[str, Any]]:
    """The hits with what they bring along (``conversations.linked``): after the best
    ``linked.NAME_HITS``, the messages that name a name of :func:`_names`, then newer
    messages close to a kept hit, then the rest."""
    taken = {row["seq"] for row in rows}
    wanted = [seq for seq in ranked[:CANDIDATES] if seq not in taken]
    missing = [seq for seq in wanted if seq not in known]
    known.update(_rows(search.conversation_id, missing) if missing else {})
    candidates = [
        {
            **known[seq],
            **({"similarity": round(similarity_of[seq], 4)} if seq in similarity_of else {}),
        }
        for seq in wanted
        if seq in known
    ]
    newer = []
    if rows:
        newer = linked.newer_neighbours(
            search.conversation_id, rows, candidates, search.before_seq,
            lambda seq: _row_at(search, seq),
        )  # fmt: skip
    taken.update(row["seq"] for row in newer)
    found = _about(search)
    about = [row for row, _ in found]
    names = [name for _, name in found] + _names(search, rows, _best_each(search, known))
    subject_of = {row["seq"]: row["about"] for row in about}
    for row in rows:  # a hit a subject phrase found too says so
        if row["seq"] in subject_of:
            row["about"] = subject_of[row["seq"]]
    about = [row for row in about if row["seq"] not in taken]
    taken.update(row["seq"] for row in about)
    named, reached = linked.follow_names(
        list(dict.fromkeys(names)), search.by_name, taken, search.query_vector
    )
    for row in rows:  # a hit that a name reached too says so, unless it gave the name
        name = reached.get(row["seq"])
        if name and name not in entities.names([row["content"]]):
            row["via"] = name
    head = rows[: linked.NAME_HITS]
    return head + about + named + newer + rows[linked.NAME_HITS :]


def _row_at(search: _Search, seq: int) -> Row | None:
    """The message at ``seq`` with its similarity to the question (when it has a vector)."""
    row = _rows(search.conversation_id, [seq]).get(seq)
    score = vectors.lookup(search.seqs, search.similarity, [seq])
    return {**row, "similarity": round(score[seq], 4)} if row and seq in score else row


def _about(search: _Search) -> list[tuple[Row, str]]:
    """The messages the question's subject phrases find alone, each with the name it
    gives (``conversations.subjects``) and its similarity to the whole question."""
    if search.query_vector is None:
        return []

    def rows_at(seqs: list[int]) -> dict[int, Row]:
        return _rows(search.conversation_id, seqs)

    try:
        found = subjects.subject_hits(
            search.conversation_id, search.query, search.query_vector, search.before_seq,
            rows_at, search.by_name,
        )  # fmt: skip
    except embeddings.EmbeddingUnavailable:
        return []
    scores = vectors.lookup(search.seqs, search.similarity, [row["seq"] for row, _ in found])
    for row, _ in found:
        if row["seq"] in scores:
            row["similarity"] = round(scores[row["seq"]], 4)
    return found


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


def _without_vector(conversation_id: str, before_seq: int | None, embedded: np.ndarray) -> bool:
    """Whether some messages below ``before_seq`` have no vector of the model in use: one
    at a seq that ``embedded`` (the seqs with one, sorted) does not have. The index is
    asked for those seqs alone (counting the messages read every one of them: 4 ms at
    10,000); a count, not ``exists()``, whose ``LIMIT 1`` the planner answers with a scan
    of the conversation."""
    below = Message.objects.filter(conversation_id=conversation_id)
    if before_seq is not None:
        below = below.filter(seq__lt=before_seq)
    if not len(embedded):
        return below.exists()
    first, last = int(embedded[0]), int(embedded[-1])
    if last - first + 1 - len(embedded) > MAX_SKIPPED:
        return below.count() > len(embedded)
    present = np.zeros(last - first + 1, dtype=bool)
    present[embedded - first] = True
    skipped = (np.flatnonzero(~present) + first).tolist()
    return below.filter(Q(seq__lt=first) | Q(seq__gt=last) | Q(seq__in=skipped)).count() > 0


def _related(query: str, conversation_id: str, before_seq: int | None) -> dict[str, list[str]]:
    """Words of the unembedded messages related to the query's (``vectors_words``)."""
    try:
        return vectors_words.related(
            terms(query), conversation_id=conversation_id, before_seq=before_seq or NO_BOUND
        )
    except embeddings.EmbeddingUnavailable:
        return {}


def _gather(search: _Search, limit: int) -> None:
    """Fills ``search``: similarities (unless ``text``), full-text hits (unless
    ``semantic``), and the vectors of the best hits by words that had none."""
    if search.mode != "text":
        try:
            search.query_vector = embeddings.embed_query(search.query)
            search.seqs, search.similarity = vectors.similarities(
                conversation_id=search.conversation_id, query=search.query_vector,
                before_seq=search.before_seq,
            )  # fmt: skip
        except embeddings.EmbeddingUnavailable as exc:
            search.fallback, search.mode, search.query_vector = str(exc), "text", None
    hybrid = search.mode == "hybrid"
    conversation_id, before_seq = search.conversation_id, search.before_seq
    if hybrid and _without_vector(conversation_id, before_seq, search.seqs):
        search.related = _related(search.query, conversation_id, before_seq)
    if search.mode != "semantic":
        search.text = search_messages(
            conversation_id=conversation_id, query=search.query,
            limit=max(limit, CANDIDATES), before_seq=before_seq,
            also=[word for words in search.related.values() for word in words],
        )  # fmt: skip
    if hybrid and search.text:
        search.seqs, search.similarity = _embed_found(
            conversation_id, search.text, search.seqs, search.similarity, search.query
        )


def _beside_best(conversation_id: str, seqs: np.ndarray, similarity: np.ndarray):
    """Whether a message is said by the best match's speaker and about the same thing: said
    after it and at least ``linked.NEIGHBOUR`` close to it in meaning (it may say what
    changed), or before it and at least ``linked.SAME_THING`` close (what it may have
    changed: "Our cleaner Bozena comes on Wednesdays." before "Bozena comes on Thursdays
    now."; kept, the agent can mark the newer one as the most recent)."""
    if not len(seqs):
        return lambda seq: False
    best = int(seqs[int(np.argmax(similarity))])

    def beside(seq: int) -> bool:
        if seq == best:
            return False
        rows = _rows(conversation_id, [best, seq])
        if len(rows) < 2 or rows[best]["role"] != rows[seq]["role"]:
            return False
        unit = vectors.vectors_of(conversation_id=conversation_id, seqs=[best, seq])
        close = linked.NEIGHBOUR if seq > best else linked.SAME_THING
        return len(unit) == 2 and float(unit[best] @ unit[seq]) >= close

    return beside


@metrics.RETRIEVAL_DURATION.time()
@vectors.one_reading()  # the conversation's vectors brought up to date once a search
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
    search = _Search(conversation_id, query, before_seq, mode)
    _gather(search, limit)
    seqs, similarity = search.seqs, search.similarity
    by_meaning = [seq for seq, _ in vectors.best(seqs, similarity, CANDIDATES)]
    by_words = [row["seq"] for row in search.text]
    scores = _fuse(by_words, by_meaning, set(seqs[np.isin(seqs, by_words)].tolist()))
    ranked = sorted(scores, key=lambda seq: (scores[seq], seq), reverse=True)
    known = {row["seq"]: row for row in search.text}
    missing = [seq for seq in ranked[: 2 * limit] if seq not in known]
    known.update(_rows(conversation_id, missing) if missing else {})
    floor_of = relevance.Floor(
        background=relevance.background(similarity),
        standout=relevance.standout(similarity),
        best=relevance.best(similarity),
        first_worded=by_words[0] if by_words else None,
        beside_best=_beside_best(conversation_id, seqs, similarity),
        query_terms=terms(query),
        worded=set(by_words),
        related=search.related,
        on=floor,
    )
    similarity_of = vectors.lookup(seqs, similarity, ranked)
    rows, dropped = relevance.kept(ranked, known, scores, similarity_of, floor_of, limit)
    if expand:
        rows = _linked(search, rows, ranked, known, similarity_of)
        taken = {row["seq"] for row in rows}
        dropped = [entry for entry in dropped if entry["seq"] not in taken]
    return Found(rows, search.mode, search.fallback, dropped)
