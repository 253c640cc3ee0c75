"""Each conversation's stored vectors of one model, kept in this process between turns,
so that a turn reads from the database only what changed.

* **First read.** A conversation's rows are read once, as stored (int8), with each row's
  inverse norm, in ``seq`` order.
* **Every later turn.** One aggregate over the ``(conversation, model, seq)`` index gives
  the stored rows' fingerprint: their count, largest ``seq`` and sum of ``seq``. Equal to
  the kept one: nothing changed. Explained by rows after the largest kept ``seq`` (the
  usual case: the turn's question and the last reply were embedded): only those rows are
  read and appended. Anything else (a message deleted, an older message embedded late by
  the catch-up or on the spot): the stored ``seq`` list is read from the index, the kept
  rows no longer stored are dropped and only the rows not kept are read. A conversation
  never reuses a ``seq``, so equal fingerprints mean the same rows.
* **Scoring.** The cosine similarity of the query with every kept row below
  ``before_seq``: int8 rows converted to float32 a block at a time (the whole matrix as
  float32 would be four times the int8 bytes), multiplied by the inverse norms. Blocks of
  ``BLOCK`` rows also keep OpenBLAS single-threaded: on a busy machine its threads for a
  larger product cost more than they save (bench/RESULTS.md, "Vectors in blocks").
* **Size.** The most recently used conversations, up to ``EMBEDDING_CACHE_MB`` per
  process (a 100,000-message conversation of 384-d vectors takes about 39 MB).
* **Within one search** (:func:`one_reading`): a conversation's vectors are brought up to
  date once, the first time they are asked for, not at each of the search's several
  similarity calls (its subject phrases, its hits' newer neighbours), and again after this
  process stores vectors (:func:`stored`: the search embeds hits that lacked one).
"""

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection

from conversations.models import MessageEmbedding

BLOCK = 1024
# At most this many rows lacking from a kept conversation are read by their seqs; more, and
# the conversation is read again whole.
RECONCILE_ROWS = 500
_TABLE = MessageEmbedding._meta.db_table
# The vectors brought up to date in the current :func:`one_reading`, by key.
_read: ContextVar[dict[tuple, "Vectors"] | None] = ContextVar("vectors_read", default=None)


@contextmanager
def one_reading() -> Iterator[None]:
    """Within it (a context manager or a decorator), each conversation's vectors are
    brought up to date with the database once, until this process stores vectors."""
    token = _read.set({})
    try:
        yield
    finally:
        _read.reset(token)


def stored() -> None:
    """This process stored vectors: the current :func:`one_reading` reads again."""
    read = _read.get()
    if read is not None:
        read.clear()


@dataclass(frozen=True)
class Fingerprint:
    """What the stored rows of a conversation and model add up to."""

    count: int = 0
    last: int = 0  # the largest seq
    total: int = 0  # the sum of seqs

    def plus(self, seqs: list[int]) -> "Fingerprint":
        return Fingerprint(self.count + len(seqs), max([self.last, *seqs]), self.total + sum(seqs))


class Vectors:
    """One conversation's vectors of one model and dimension, in ``seq`` order. Rows
    ``[0, size)`` are valid; appending writes past them, so a reader's snapshot of the
    first ``size`` rows never changes under it."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.seqs = np.zeros(0, dtype=np.int64)
        self.rows = np.zeros((0, dimension), dtype=np.int8)
        self.inverse_norms = np.zeros(0, dtype=np.float32)
        self.size = 0
        self.fingerprint = Fingerprint()

    @property
    def nbytes(self) -> int:
        return self.seqs.nbytes + self.rows.nbytes + self.inverse_norms.nbytes

    def append(self, pairs: list[tuple[int, int, bytes]], fingerprint: Fingerprint) -> None:
        """Adds ``(seq, dimension, vector)`` rows with larger seqs, those of this
        dimension only (the fingerprint counts them all)."""
        kept = [(seq, vector) for seq, dimension, vector in pairs if dimension == self.dimension]
        end = self.size + len(kept)
        if end > len(self.seqs):  # grow by doubling: appends cost what they add
            capacity = max(end, 2 * len(self.seqs), 64)
            self.seqs = _grown(self.seqs, capacity, self.size)
            self.rows = _grown(self.rows, capacity, self.size)
            self.inverse_norms = _grown(self.inverse_norms, capacity, self.size)
        if kept:
            raw = b"".join(bytes(vector) for _, vector in kept)
            rows = np.frombuffer(raw, dtype=np.int8).reshape(len(kept), self.dimension)
            self.rows[self.size : end] = rows
            self.seqs[self.size : end] = [seq for seq, _ in kept]
            for start in range(0, len(kept), BLOCK):
                block = rows[start : start + BLOCK].astype(np.float32)
                norms = np.sqrt(np.einsum("ij,ij->i", block, block))
                at = self.size + start
                self.inverse_norms[at : at + len(block)] = 1.0 / np.maximum(norms, 1e-6)
        self.size = end
        self.fingerprint = fingerprint

    def reconciled(self, stored: np.ndarray, added: list[tuple[int, int, bytes]]) -> "Vectors":
        """A new copy holding the kept rows whose seq is in ``stored`` (the seqs stored now)
        and the ``added`` rows (those of ``stored`` not kept), in ``seq`` order; this one
        stays as it is for the readers that hold it."""
        size = self.size
        keep = np.isin(self.seqs[:size], stored)
        fresh = Vectors(self.dimension)
        fresh.append(added, Fingerprint())
        seqs = np.concatenate([self.seqs[:size][keep], fresh.seqs[: fresh.size]])
        order = np.argsort(seqs, kind="stable")
        fresh.seqs = seqs[order]
        fresh.rows = np.concatenate([self.rows[:size][keep], fresh.rows[: fresh.size]])[order]
        norms = [self.inverse_norms[:size][keep], fresh.inverse_norms[: fresh.size]]
        fresh.inverse_norms = np.concatenate(norms)[order]
        fresh.size = len(seqs)
        fresh.fingerprint = Fingerprint().plus(stored.tolist())
        return fresh

    def similarities(self, queries: np.ndarray, before_seq: int) -> tuple[np.ndarray, np.ndarray]:
        """``(seqs, cosine similarities)`` of the rows with ``seq < before_seq``; for
        several ``queries`` (a matrix, one a row), a row of similarities each, each block
        of rows converted once for all of them."""
        size = self.size
        seqs, rows, inverse_norms = self.seqs[:size], self.rows[:size], self.inverse_norms[:size]
        count = int(np.searchsorted(seqs, before_seq, side="left"))
        each = np.atleast_2d(queries).astype(np.float32)
        scores = np.empty((len(each), count), dtype=np.float32)
        for start in range(0, count, BLOCK):
            stop = min(start + BLOCK, count)
            block = rows[start:stop].astype(np.float32)
            for query, out in zip(each, scores, strict=True):
                np.dot(block, query, out=out[start:stop])
        scores *= inverse_norms[:count]
        return seqs[:count], scores if queries.ndim == 2 else scores[0]

    def of(self, wanted: list[int]) -> dict[int, np.ndarray]:
        """The unit vectors of the ``wanted`` seqs that have one, by seq."""
        size = self.size
        seqs = self.seqs[:size]
        where = np.searchsorted(seqs, wanted)
        found = {}
        for seq, i in zip(wanted, where.tolist(), strict=True):
            if i < size and seqs[i] == seq:
                found[seq] = self.rows[i].astype(np.float32) * self.inverse_norms[i]
        return found


def _grown(array: np.ndarray, capacity: int, used: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def _fingerprint(conversation_id: str, model: str) -> Fingerprint:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), coalesce(max(seq), 0), coalesce(sum(seq), 0) FROM {_TABLE} "
            "WHERE conversation_id = %s AND model = %s",
            [conversation_id, model],
        )
        count, last, total = cursor.fetchone()
    return Fingerprint(int(count), int(last), int(total))


def _rows_after(conversation_id: str, model: str, seq: int) -> list[tuple[int, int, bytes]]:
    """The conversation's rows of the model with a larger seq: one indexed range read as
    raw tuples (the ORM's per-row work would cost more than the arithmetic)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq, dimension, vector FROM {_TABLE} "
            "WHERE conversation_id = %s AND model = %s AND seq > %s ORDER BY seq",
            [conversation_id, model, seq],
        )
        return cursor.fetchall()


def _stored_seqs(conversation_id: str, model: str) -> np.ndarray:
    """The seqs of the conversation's rows of the model, from the index alone."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq FROM {_TABLE} WHERE conversation_id = %s AND model = %s ORDER BY seq",
            [conversation_id, model],
        )
        return np.array([seq for (seq,) in cursor.fetchall()], dtype=np.int64)


def _rows_at(conversation_id: str, model: str, seqs: list[int]) -> list[tuple[int, int, bytes]]:
    """The conversation's rows of the model with these seqs."""
    found = MessageEmbedding.objects.filter(
        conversation_id=conversation_id, model=model, seq__in=seqs
    )
    return list(found.order_by("seq").values_list("seq", "dimension", "vector"))


class VectorCache:
    """The kept conversations, most recently used last."""

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def forget(self, conversation_id: str) -> None:
        with self._lock:
            for key in [key for key in self._entries if key[1] == conversation_id]:
                del self._entries[key]

    def vectors(self, conversation_id: str, model: str, dimension: int) -> Vectors:
        """The conversation's vectors, brought up to date with the database (once in a
        :func:`one_reading`)."""
        key = (connection.settings_dict["NAME"], conversation_id, model, dimension)
        read = _read.get()
        if read is None:
            return self._up_to_date(key)
        if key not in read:
            read[key] = self._up_to_date(key)
        return read[key]

    def _up_to_date(self, key: tuple) -> Vectors:
        _, conversation_id, model, dimension = key
        with self._lock:
            entry = self._entries.get(key)
        now = _fingerprint(conversation_id, model)
        if entry is not None and entry.fingerprint == now:
            self._keep(key, entry)
            return entry
        if entry is not None and now.last > entry.fingerprint.last:
            kept = entry.fingerprint
            added = _rows_after(conversation_id, model, kept.last)
            grown = kept.plus([seq for seq, _, _ in added])
            if grown == now:
                with self._lock:
                    if entry.fingerprint == kept:  # not appended by another thread meanwhile
                        entry.append(added, grown)
                if entry.fingerprint == grown:
                    self._keep(key, entry)
                    return entry
        if entry is not None:  # not an append: read what the kept rows lack
            stored = _stored_seqs(conversation_id, model)
            lacking = np.setdiff1d(stored, entry.seqs[: entry.size]).tolist()
            if len(lacking) <= RECONCILE_ROWS:
                fresh = entry.reconciled(stored, _rows_at(conversation_id, model, lacking))
                self._keep(key, fresh)
                return fresh
        fresh = Vectors(dimension)  # read it all
        rows = _rows_after(conversation_id, model, 0)
        fresh.append(rows, Fingerprint().plus([seq for seq, _, _ in rows]))
        self._keep(key, fresh)
        return fresh

    def _keep(self, key: tuple, entry: Vectors) -> None:
        limit = settings.EMBEDDING_CACHE_MB * 1024 * 1024
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            used = sum(kept.nbytes for kept in self._entries.values())
            while used > limit and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                used -= dropped.nbytes


CACHE = VectorCache()
