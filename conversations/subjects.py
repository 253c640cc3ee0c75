"""A second round of retrieval on what the question is about, alone.

"What subject does my brother's other half teach, and where is she from?" is hardly like
"My brother's partner is Svetlana." as a whole (its other words are about teaching and
origins), but its subject, "my brother's other half", is: a relation said in other words.
The phrases a possessive or "the" opens (:func:`subject_phrases`) are searched alone by
meaning; the best message for a phrase is kept when it stands out from the background of
that phrase (the same floor as a hit of the whole question, ``conversations.relevance``)
and names someone or something: the names are what the round is for, since the facts
about them (``conversations.linked``) share no word with the question.

Bounded: at most ``MAX_PHRASES`` phrases, ``MAX_VARIANTS`` embeddings in all (a phrase's
openings of two words and more: where a phrase ends is not known without a parser, and
"the man who fixes our pipes" is only close to "The plumber we use is Hamid." whole).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from conversations import entities, relevance, vectors
from gateway import embeddings

MAX_PHRASES = 2
MAX_VARIANTS = 10
PHRASE_WORDS = 7

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
    for variant in variants:
        seqs, similarity = vectors.similarities(
            conversation_id=conversation_id, query=embeddings.embed_query(variant),
            before_seq=before_seq,
        )  # fmt: skip
        if len(seqs) < relevance.BACKGROUND_RANK:
            return None
        at = int(np.argmax(similarity))
        score = float(similarity[at])
        above = score - relevance.background(similarity)
        if found is None or above > found.above:
            found = Standing(variant, int(seqs[at]), score, above)
    needed = relevance.SIMILARITY_MARGIN
    if found and found.similarity >= relevance.SIMILARITY_FLOOR and found.above >= needed:
        return found
    return None


def subject_hits(
    conversation_id: str,
    question: str,
    before_seq: int | None,
    rows_at: Callable[[list[int]], dict[int, Row]],
) -> list[Row]:
    """The best message for each subject phrase of ``question`` that stands out and names
    a name the question does not say, with ``about``: the phrase (``rows_at``: the rows of
    some seqs). Raises EmbeddingUnavailable."""
    hits: dict[int, str] = {}
    budget = MAX_VARIANTS
    for variants in subject_phrases(question):
        variants = variants[:budget]
        budget -= len(variants)
        standing = _best_of(conversation_id, variants, before_seq) if variants else None
        if standing is not None:
            hits.setdefault(standing.seq, standing.phrase)
    rows = rows_at(list(hits)) if hits else {}
    return [
        {**rows[seq], "about": phrase}
        for seq, phrase in hits.items()
        if seq in rows and entities.names([rows[seq]["content"]], exclude=question)
    ]
