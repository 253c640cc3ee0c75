"""A second round of retrieval on what the question is about, alone.

"What subject does my brother's other half teach, and where is she from?" is hardly like
"My brother's partner is Svetlana." as a whole (its other words are about teaching and
origins), but its subject, "my brother's other half", is: a relation said in other words.
The phrases a possessive or "the" opens (:func:`subject_phrases`) are searched alone by
meaning; the best message for a phrase is kept when it stands out from the background of
that phrase (the same floor as a hit of the whole question, ``conversations.relevance``)
and names someone whose few messages, read together, fit the question (the names are what
the round is for: the facts about them share no word with the question); they are then
followed like the names of the best hits (``conversations.linked``). An embedder takes a
brother for a sister and an electrician for an accountant; facts about the wrong person
read together fit the question less than the best of them alone.

Bounded: at most ``MAX_PHRASES`` phrases, ``MAX_VARIANTS`` embeddings in all (a phrase's
openings of two words and more: where a phrase ends is not known without a parser, and
"the man who fixes our pipes" is only close to "The plumber we use is Hamid." whole).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from conversations import entities, linked, relevance, vectors
from gateway import embeddings

MAX_PHRASES = 2
MAX_VARIANTS = 10
PHRASE_WORDS = 7
# A subject hit's name's messages, read together, may be at most this much less like the
# question than the best of them alone (chosen on the tuning half of
# bench/memory_abilities.py: facts about the brother's partner 0.0 to 0.17 more, facts
# about a sister, a cousin or an accountant asked as a brother, an uncle or an electrician
# 0.05 to 0.18 less).
SUBJECT_LOSS = 0.02

Row = dict[str, Any]
# Where a subject phrase ends: a clause's punctuation, a conjunction or an auxiliary verb.
_END = (
    r"[,?.!;]|\b(?:and|or|but|is|are|was|were|does|do|did|has|have|had|will|would|can|"
    r"could|should|must)\b"
)
_OPENING = re.compile(rf"\b(?:my|our|the)\s+(.+?)\s*(?={_END}|$)", re.IGNORECASE)


def subject_phrases(question: str) -> list[list[str]]:
    """The question's phrases that a possessive or "the" opens, each as its openings of
    two words and more (at most ``PHRASE_WORDS``): ``[["my brother's", "my brother's
    other", ...], ...]``; at most ``MAX_PHRASES`` phrases."""
    phrases: list[list[str]] = []
    for match in _OPENING.finditer(question):
        words = match.group(0).split()[:PHRASE_WORDS]
        if len(words) >= 2:
            phrases.append([" ".join(words[:n]) for n in range(2, len(words) + 1)])
    return phrases[:MAX_PHRASES]


@dataclass
class Standing:
    phrase: str
    seq: int
    similarity: float
    above: float  # how far above the phrase's background


def _best_of(conversation_id: str, variants: list[str], before_seq: int | None) -> Standing | None:
    """The message that stands out most for one of ``variants`` (by how far it is above
    that variant's background), if it clears the relevance floor."""
    found: Standing | None = None
    queries = embeddings.embed_kept(variants)  # those not kept in one batch
    seqs, each = vectors.similarities(
        conversation_id=conversation_id, query=queries, before_seq=before_seq
    )
    if len(seqs) < relevance.BACKGROUND_RANK:
        return None
    for variant, similarity in zip(variants, each, strict=True):
        at = int(np.argmax(similarity))
        score = float(similarity[at])
        above = score - relevance.background(similarity)
        if found is None or above > found.above:
            found = Standing(variant, int(seqs[at]), score, above)
    needed = relevance.SIMILARITY_MARGIN
    if found and found.similarity >= relevance.SIMILARITY_FLOOR and found.above >= needed:
        return found
    return None


def _fitting_name(
    row: Row, question: str, query_vector: np.ndarray, by_name: linked.Search
) -> str | None:
    """The first name of ``row`` (one the question does not say) that a few messages
    name (2 to ``linked.RARE``) whose messages, read together, are at least as like the
    question as the best of them alone (less ``SUBJECT_LOSS``): facts that fit the
    question together. Facts about someone else do not ("What is my brother's name?" and
    "My sister is Ana.", "Ana lives in Oslo.": 0.05 less together)."""
    for name in entities.names([row["content"]], exclude=question):
        hits = by_name(name, linked.RARE + 1)
        if not 2 <= len(hits) <= linked.RARE:
            continue
        joined, alone = linked.joined_similarity(hits, query_vector)
        if joined >= alone - SUBJECT_LOSS:
            return name
    return None


def subject_hits(
    conversation_id: str,
    question: str,
    query_vector: np.ndarray,
    before_seq: int | None,
    rows_at: Callable[[list[int]], dict[int, Row]],
    by_name: linked.Search,
) -> list[tuple[Row, str]]:
    """The best message for each subject phrase of ``question`` that stands out, with
    ``about`` (the phrase), and the name of it to follow (:func:`_fitting_name`); those
    with no such name are left out. ``rows_at``: the rows of some seqs; ``by_name``: the
    messages naming a name. Raises EmbeddingUnavailable."""
    hits: dict[int, str] = {}
    budget = MAX_VARIANTS
    for variants in subject_phrases(question):
        variants = variants[:budget]
        budget -= len(variants)
        standing = _best_of(conversation_id, variants, before_seq) if variants else None
        if standing is not None:
            hits.setdefault(standing.seq, standing.phrase)
    rows = rows_at(list(hits)) if hits else {}
    found = []
    for seq, phrase in hits.items():
        name = _fitting_name(rows[seq], question, query_vector, by_name) if seq in rows else None
        if name is not None:
            found.append(({**rows[seq], "about": phrase}, name))
    return found
