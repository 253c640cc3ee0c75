"""Full-text search over one conversation's messages, ranked by the database's own
full-text ranking.

The query is made websearch-style from the question: its quoted phrases and its
meaningful words (stopwords left out, at most ``MAX_KEYWORDS``), any of which a message
may match (``"spare key" or flowerpot or door``); a message with more of them, and
rarer ones, ranks higher.

* **SQLite**: the FTS5 table of migration 0003 (Porter stemmer, kept in step with the
  messages by triggers), ranked by ``bm25`` over the ``content`` column (the
  ``conversation_id`` column, which scopes the match through the same index, weighs
  nothing). Its statistics (document frequencies, mean length) are those of the whole
  table, not of the one conversation.
* **PostgreSQL**: the stored ``search_vector`` column (English configuration) and its
  GIN index on ``(conversation_id, search_vector)``, queried with
  ``websearch_to_tsquery`` and ranked by ``ts_rank`` with normalisation 1 (divided by
  1 + the log of the message's length, so that a long paste that repeats a word does not
  outrank a short message that has it once). ``ts_rank`` counts how often a message has
  the query's words, not how rare they are.
* **Otherwise** (SQLite without FTS5, or its triggers gone): ``LIKE`` scans of the
  conversation's newest ``PLAIN_SCAN`` matches, scored by how many of the words each has.
  This fallback exists so that search always works.

Either ranking reads every message of the conversation that matches one of the words
(the database computes the rank of each before it can sort): its cost grows with how
many messages share a word with the question.
"""

import re
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Q

from conversations.models import Message
from conversations.selectors import MESSAGE_FIELDS

# Words that carry no meaning for finding a message. Question words and pronouns are
# here because the new message is usually a question about something said before.
_STOPWORDS = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    else ever few for from further had has have having he her here hers herself him himself
    his how i if in into is it its itself just let me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own please remember remind same
    say said she should so some such tell than that the their theirs them themselves then
    there these they this those through to too under until up us very was we were what
    when where which while who whom why will with would you your yours yourself yourselves
    know think recall earlier mentioned told asked ask
"""
STOPWORDS = frozenset(_STOPWORDS.split())
MAX_KEYWORDS = 8
PLAIN_SCAN = 500
NO_BOUND = 2**31 - 1
NO_ID = 2**63 - 1
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_QUOTED = re.compile(r'"([^"]+)"')


def keywords(text: str) -> list[str]:
    """The distinct meaningful words of ``text``, in order, lowercased (at most 8)."""
    seen: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()) or word in seen:
            continue
        seen.append(word)
        if len(seen) == MAX_KEYWORDS:
            break
    return seen


def terms(text: str) -> list[str]:
    """The query's terms: its quoted phrases (as phrases, when they have a meaningful
    word) and then its keywords outside them, at most ``MAX_KEYWORDS`` in all."""
    phrases = [
        " ".join(_WORD.findall(quoted.lower()))
        for quoted in _QUOTED.findall(text)
        if keywords(quoted)
    ]
    return (phrases + keywords(_QUOTED.sub(" ", text)))[:MAX_KEYWORDS]


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


# --- SQLite: FTS5 and bm25 ------------------------------------------------------------------


def _fts5_ready() -> bool:
    """The FTS5 table and the trigger that fills it exist (see migration 0003)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN "
            "('conversations_message_fts', 'conversations_message_fts_insert')"
        )
        return cursor.fetchone()[0] == 2


def _fts5_query(conversation_id: str, words: list[str], before: int) -> list:
    """The match (scoped by the conversation column) and the id bound (ids grow with seq
    in a conversation) of :func:`_fts5`."""
    match = f"conversation_id : {_quoted(conversation_id)} AND ({' OR '.join(map(_quoted, words))})"
    bound = (
        Message.objects.filter(conversation_id=conversation_id, seq__gte=before)
        .order_by("seq")
        .values_list("id", flat=True)
        .first()
    )
    return [match, NO_ID if bound is None else bound]


def _fts5_seqs(conversation_id: str, found: list[tuple]) -> list[tuple]:
    """``found`` (rows that open with a message id) with the id replaced by its seq."""
    ids = [row[0] for row in found]
    messages = Message.objects.filter(conversation_id=conversation_id, id__in=ids)
    seqs = dict(messages.values_list("id", "seq"))
    return [(seqs[row[0]], *row[1:]) for row in found if row[0] in seqs]


def _fts5(conversation_id: str, words: list[str], before: int, limit: int) -> list[tuple]:
    """``(seq, score)`` best first (``bm25`` is lower for a better match). The ranking
    reads the FTS table alone: joining each match to its message cost a third of the time
    when thousands of messages share a word."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rowid, -bm25(conversations_message_fts, 1.0, 0.0) AS score "
            "FROM conversations_message_fts WHERE conversations_message_fts MATCH %s "
            "AND rowid < %s ORDER BY score DESC, rowid DESC LIMIT %s",
            [*_fts5_query(conversation_id, words, before), limit],
        )
        return _fts5_seqs(conversation_id, cursor.fetchall())


def _fts5_any(conversation_id: str, words: list[str], before: int, limit: int) -> list[tuple]:
    """``(seq, None)`` of at most ``limit`` matches, unranked (``bm25`` of even one match
    counts the documents that have each word in the whole table)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rowid, NULL FROM conversations_message_fts WHERE conversations_message_fts "
            "MATCH %s AND rowid < %s LIMIT %s",
            [*_fts5_query(conversation_id, words, before), limit],
        )
        return _fts5_seqs(conversation_id, cursor.fetchall())


# --- PostgreSQL: tsvector and ts_rank -------------------------------------------------------


def _postgres(conversation_id: str, words: list[str], before: int, limit: int) -> list[tuple]:
    """``(seq, score)`` best first, by ``ts_rank`` over ``websearch_to_tsquery``."""
    query = " or ".join(_quoted(word) if " " in word else word for word in words)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq, ts_rank(search_vector, query, 1) AS score "
            "FROM conversations_message, websearch_to_tsquery('english', %s) AS query "
            "WHERE conversation_id = %s AND search_vector @@ query AND seq < %s "
            "ORDER BY score DESC, seq DESC LIMIT %s",
            [query, conversation_id, before, limit],
        )
        return cursor.fetchall()


def _postgres_any(conversation_id: str, words: list[str], before: int, limit: int) -> list[tuple]:
    """``(seq, score)`` of at most ``limit`` matches, unranked: ``ts_rank`` of those read
    alone, not of every match (so that fewer than ``limit`` are all of them, ranked as
    :func:`_postgres` ranks them). The matches are planned as the ranked search plans them
    (a ``LIMIT`` may make a scan of the whole conversation look cheaper than the index for a
    word rare in it but common in others), and read no further than ``limit``."""
    query = " or ".join(_quoted(word) if " " in word else word for word in words)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH found AS MATERIALIZED (SELECT seq, search_vector, query "
            "FROM conversations_message, websearch_to_tsquery('english', %s) AS query "
            "WHERE conversation_id = %s AND search_vector @@ query AND seq < %s) "
            "SELECT seq, ts_rank(search_vector, query, 1) FROM found LIMIT %s",
            [query, conversation_id, before, limit],
        )
        return cursor.fetchall()


# --- Anything else: LIKE ---------------------------------------------------------------------


def _plain(conversation_id: str, words: list[str], before: int, limit: int) -> list[tuple]:
    """``(seq, score)`` best first: how many of the words a message contains."""
    either = Q()
    for word in words:
        either |= Q(content__icontains=word)
    messages = Message.objects.filter(either, conversation_id=conversation_id, seq__lt=before)
    scored = [
        (seq, float(sum(word in content.lower() for word in words)))
        for seq, content in messages.order_by("-seq").values_list("seq", "content")[:PLAIN_SCAN]
    ]
    return sorted(scored, key=lambda pair: (pair[1], pair[0]), reverse=True)[:limit]


def backend() -> str:
    """Which search runs on this database: ``postgresql``, ``fts5`` or ``plain``."""
    if connection.vendor == "postgresql":
        return "postgresql"
    if connection.vendor == "sqlite" and _fts5_ready():
        return "fts5"
    return "plain"


FINDERS = {"postgresql": _postgres, "fts5": _fts5, "plain": _plain}
# Unranked matches (``plain`` scans no more than it ranks: it has none).
ANY = {"postgresql": _postgres_any, "fts5": _fts5_any}


def search_messages(
    *,
    conversation_id: str,
    query: str,
    limit: int,
    before_seq: int | None = None,
    also: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The best matches for ``query`` among the conversation's messages with
    ``seq < before_seq``, best first: dicts of seq, role, content, token_estimate,
    created_at and score (the database's rank; ties go to the newer message). No
    meaningful words, no matches. ``also``: more words any of which a match may have
    (words related to the query's, ``conversations.vectors_words``)."""
    words = terms(query)
    words += [word for word in dict.fromkeys(also) if word not in words]
    if not words or limit < 1:
        return []
    ranked = FINDERS[backend()](conversation_id, words, before_seq or NO_BOUND, limit)
    return _matches(conversation_id, ranked)


def _matches(conversation_id: str, ranked: list[tuple]) -> list[dict[str, Any]]:
    """The messages of ``(seq, score)`` pairs with their score, best first."""
    if not ranked:
        return []
    scores = {seq: float(score) for seq, score in ranked}
    rows = Message.objects.filter(conversation_id=conversation_id, seq__in=scores).order_by()
    matches = [
        {**row, "score": round(scores[row["seq"]], 4)} for row in rows.values(*MESSAGE_FIELDS)
    ]
    return sorted(matches, key=lambda row: (row["score"], row["seq"]), reverse=True)


def search_rare(
    *, conversation_id: str, query: str, limit: int, before_seq: int | None = None
) -> list[dict[str, Any]]:
    """:func:`search_messages` for a caller to whom the matches matter only when fewer
    than ``limit`` messages match (a name whose messages are few): when ``limit`` or more
    do, ``limit`` of their seqs alone (``{"seq", "score": None}``, newest first), found
    without ranking every match (the ranking of a word thousands of messages have costs as
    much as the rest of a search) and without reading the messages."""
    words = terms(query)
    finder = ANY.get(backend())
    if words and limit >= 1 and finder is not None:
        found = finder(conversation_id, words, before_seq or NO_BOUND, limit)
        if len(found) >= limit:
            return [{"seq": seq, "score": None} for seq, _ in sorted(found, reverse=True)]
        if all(score is not None for _, score in found):  # all of them, ranked (PostgreSQL)
            return _matches(conversation_id, found)
    return search_messages(
        conversation_id=conversation_id, query=query, limit=limit, before_seq=before_seq
    )
