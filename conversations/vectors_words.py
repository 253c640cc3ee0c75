"""Words that mean what the question's words mean, for the messages without a vector yet.

A message that the catch-up has not embedded (an import, a message stored while the
embedder was down) competes on its words only (``conversations.retrieval``), and a
paraphrased question shares none with it: "Where did I leave my vehicle?" and "I parked
the car on level 3." The embedder that has not reached the message yet can still read
words: the vocabulary of the conversation's messages without a vector is embedded word by
word (a word is a short text: hundreds a second, each word once per process, kept in
:data:`CACHE_WORDS`), and each keyword of the question brings the vocabulary's words
nearest to it in meaning (``vehicle`` -> ``car``). The full-text search then looks for
those too. Only while some messages lack a vector: an embedded message is found by its
own meaning.

Bounded: at most ``MAX_MESSAGES`` messages are read for the vocabulary (the oldest
without a vector first, as the catch-up goes), at most ``MAX_NEW_WORDS`` new words
embedded per search (the rest on the next ones), at most ``PER_KEYWORD`` words per
keyword, each at least ``WORD_FLOOR`` similar to it.
"""

import re
import threading
from collections import OrderedDict

import numpy as np
from django.db.models import Exists, OuterRef

from conversations.models import Message, MessageEmbedding
from conversations.search import STOPWORDS
from gateway import embeddings

MAX_MESSAGES = 20_000
MAX_NEW_WORDS = 2_000
CACHE_WORDS = 50_000
PER_KEYWORD = 2
WORD_FLOOR = 0.6
_WORD = re.compile(r"[a-z]{3,}")

_lock = threading.Lock()
_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def vocabulary(conversation_id: str, before_seq: int, model: str) -> list[str]:
    """The distinct words of the conversation's messages that have no vector of ``model``
    (``seq < before_seq``), stopwords left out."""
    done = MessageEmbedding.objects.filter(message=OuterRef("pk"), model=model)
    contents = (
        Message.objects.filter(conversation_id=conversation_id, seq__lt=before_seq)
        .filter(~Exists(done))
        .order_by("seq")
        .values_list("content", flat=True)[:MAX_MESSAGES]
    )
    words: set[str] = set()
    for content in contents:
        words.update(_WORD.findall(content.lower()))
    return sorted(words - STOPWORDS)


def _word_vectors(words: list[str], model: str) -> tuple[list[str], np.ndarray]:
    """The words that have a vector (at most ``MAX_NEW_WORDS`` embedded now), and them."""
    with _lock:
        missing = [word for word in words if (model, word) not in _vectors]
    if missing:
        missing = missing[:MAX_NEW_WORDS]
        matrix = embeddings.embed(missing)
        with _lock:
            for word, vector in zip(missing, matrix, strict=True):
                _vectors[(model, word)] = vector.astype(np.float16)
            while len(_vectors) > CACHE_WORDS:
                _vectors.popitem(last=False)
    with _lock:
        known = [word for word in words if (model, word) in _vectors]
        if not known:
            return [], np.zeros((0, 1), dtype=np.float32)
        return known, np.vstack([_vectors[(model, word)] for word in known]).astype(np.float32)


def related(keywords: list[str], *, conversation_id: str, before_seq: int) -> dict[str, list[str]]:
    """For each keyword, the words of the unembedded messages nearest to it in meaning
    (none that share its stem). Raises EmbeddingUnavailable."""
    model = embeddings.model_id()
    plain = [word for word in keywords if " " not in word]
    if model is None or not plain:
        return {}
    words, matrix = _word_vectors(vocabulary(conversation_id, before_seq, model), model)
    if not words:
        return {}
    queries = embeddings.embed(plain)
    found: dict[str, list[str]] = {}
    for keyword, similarity in zip(plain, queries @ matrix.T, strict=True):
        order = np.argsort(-similarity)[: PER_KEYWORD + 4]
        near = [
            words[i]
            for i in order
            if similarity[i] >= WORD_FLOOR and _stem(words[i]) != _stem(keyword)
        ]
        if near[:PER_KEYWORD]:
            found[keyword] = near[:PER_KEYWORD]
    return found


def forget() -> None:
    with _lock:
        _vectors.clear()
