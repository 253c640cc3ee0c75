"""Full-text search over one conversation's messages, at a cost that hardly grows with
the conversation.

Ranking every message that shares a word with the query (what ``ORDER BY bm25()`` or
``ts_rank`` do) costs as much as there are such messages: thousands in a long
conversation when the question has a common word. So the search works in two steps:

1. **Candidates**, at most ``CANDIDATES_PER_QUERY`` messages per query, through the
   database's full-text index: one query per keyword; then, for the keywords that are
   common (whose query hit the limit), one query for all of them together and, when it
   finds fewer messages than asked for, one for any all but one of them: a message with
   several common words of the question is rare again. A query that stays below the
   limit found all its messages. Combined queries on SQLite, and walks on PostgreSQL,
   only look at the newest ``COMBINED_WINDOW`` messages: an old message all of whose
   keywords are common in a very long conversation can be missed, while a rare keyword
   finds its messages at any depth.

   * SQLite: the FTS5 table (Porter stemmer). The conversation is a column of the FTS
     table, so ``conversation_id : "<id>" AND "<word>"`` is answered from the index,
     newest first, stopping at the limit.
   * PostgreSQL: the stored ``search_vector`` (English stemmer). A query whose words
     are common enough, by the column's statistics (``pg_stats``), that the newest
     ``WALK_ROWS`` messages should hold enough of its messages walks them through the
     ``(conversation, seq)`` index; any other query uses the GIN index on
     ``(conversation_id, search_vector)``, which lists the few messages it has.
   * Otherwise (SQLite without FTS5, or its triggers gone): ``LIKE`` scans of the
     conversation. This fallback's cost grows with the conversation; it exists so that
     search always works.

2. **Scoring** of the candidates: each keyword a message contains adds its inverse
   document frequency, ``ln(1 + N / df)`` (``df`` counted for rare words, estimated from
   the density of the newest matches for common ones), so a message with the rare words
   of the question wins over one with many common ones; ties go to the newer message.
   Whether a candidate contains a common word that did not list it is read from its
   text: a word starting with the keyword's stem (a light suffix-stripping one).
"""

import itertools
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from conversations.models import Conversation, Message
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
CANDIDATES_PER_QUERY = 40
COMBINED_WINDOW = 20_000
WALK_ROWS = 2000
NO_BOUND = 2**31 - 1
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ies", "ing", "ed", "es", "s", "ly")


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


def _stem(word: str) -> str:
    """A light stemmer for reading candidates: 'lockers' -> 'locker', 'stored' -> 'stor'."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word.removesuffix("e") if len(word) > 3 else word


@dataclass
class Candidates:
    """For one query: messages that match it (seqs), and whether that is all of them."""

    seqs: list[int]
    complete: bool


# A query: alternatives, any of which a message must match; an alternative: words, all
# of which it must contain.
Query = list[tuple[str, ...]]
# (conversation_id, queries, before_seq, windowed=) -> for each query, its messages.
Finder = Callable[..., list[Candidates]]


# --- SQLite: FTS5 ------------------------------------------------------------------------------


def _fts5_ready() -> bool:
    """The FTS5 table and the trigger that fills it exist (see migration 0003)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN "
            "('conversations_message_fts', 'conversations_message_fts_insert')"
        )
        return cursor.fetchone()[0] == 2


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _fts5(
    conversation_id: str, queries: list[Query], before: int, *, windowed: bool
) -> list[Candidates]:
    lowest = 0  # the message id where the window starts (ids grow with seq)
    if windowed and before - COMBINED_WINDOW > 1:
        first = Message.objects.filter(
            conversation_id=conversation_id, seq__gte=before - COMBINED_WINDOW
        ).order_by("seq")
        lowest = first.values_list("id", flat=True).first() or 0
    sql = (
        "SELECT m.seq FROM conversations_message_fts f "
        "JOIN conversations_message m ON m.id = f.rowid "
        "WHERE conversations_message_fts MATCH %s AND f.rowid >= %s "
        "AND m.conversation_id = %s AND m.seq < %s "
        "ORDER BY f.rowid DESC LIMIT %s"
    )
    found = []
    with connection.cursor() as cursor:
        for query in queries:
            either = " OR ".join(
                "(" + " AND ".join(map(_phrase, alternative)) + ")" for alternative in query
            )
            match = f"conversation_id : {_phrase(conversation_id)} AND ({either})"
            cursor.execute(sql, [match, lowest, conversation_id, before, CANDIDATES_PER_QUERY])
            seqs = [row[0] for row in cursor.fetchall()]
            found.append(Candidates(seqs, len(seqs) < CANDIDATES_PER_QUERY and not lowest))
    return found


# --- PostgreSQL: tsvector and GIN ---------------------------------------------------------------

_COMMON_TTL = 600.0
_common: dict[str, tuple[float, dict[str, float]]] = {}


def _common_lexemes() -> dict[str, float]:
    """The column's most common lexemes and their frequencies, from the planner's
    statistics (kept per process for ten minutes)."""
    key = connection.settings_dict["NAME"]
    cached = _common.get(key)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT e, f FROM pg_stats, "
            "unnest(most_common_elems::text::text[], most_common_elem_freqs) AS u(e, f) "
            "WHERE tablename = 'conversations_message' AND attname = 'search_vector' "
            "AND e IS NOT NULL"
        )
        common = dict(cursor.fetchall())
    _common[key] = (time.monotonic() + _COMMON_TTL, common)
    return common


def _walk_newest(terms: list[str], common: dict[str, float]) -> bool:
    """Whether walking back from the newest message finds a query's messages soon: all its
    words are common, and together (taken as independent) one message in at most
    ``WALK_ROWS / CANDIDATES_PER_QUERY`` has them."""
    if not all(term in common for term in terms):
        return False
    return CANDIDATES_PER_QUERY / math.prod(common[term] for term in terms) <= WALK_ROWS


def _postgres(
    conversation_id: str, queries: list[Query], before: int, *, windowed: bool
) -> list[Candidates]:
    words = sorted({word for query in queries for alternative in query for word in alternative})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(%s::text[]) AS w",
            [words],
        )
        lexemes = {word: found[0] for word, found in cursor.fetchall() if found}
    common = _common_lexemes()
    sql = (
        "SELECT seq FROM conversations_message WHERE conversation_id = %s "
        "AND search_vector @@ to_tsquery('simple', %s) AND seq < %s {extra} LIMIT %s"
    )
    found: list[Candidates] = []
    walking = None
    # The planner is told which index to use: it cannot know that a word it has no
    # statistics for is rare here, and would walk the whole conversation looking for it.
    with transaction.atomic(), connection.cursor() as cursor:
        try:
            for query in queries:
                alternatives = [
                    [lexemes[word] for word in alternative if word in lexemes]
                    for alternative in query
                ]
                alternatives = [terms for terms in alternatives if terms]
                if not alternatives:  # only stopwords of the English configuration
                    found.append(Candidates([], True))
                    continue
                tsquery = " | ".join(
                    "(" + " & ".join("'" + t.replace("'", "''") + "'" for t in terms) + ")"
                    for terms in alternatives
                )
                walk = all(_walk_newest(terms, common) for terms in alternatives)
                if walk != walking:  # walk: back along (conversation, seq), no sorting
                    on, off = ("on", "off") if walk else ("off", "on")
                    cursor.execute(
                        f"SET LOCAL enable_bitmapscan = {off}; SET LOCAL enable_sort = {off}; "
                        f"SET LOCAL enable_indexscan = {on}"
                    )
                    walking = walk
                if walk:  # the newest messages have enough of them
                    extra = "AND seq >= %s ORDER BY seq DESC"
                    params = [conversation_id, tsquery, before, before - COMBINED_WINDOW]
                else:  # few messages match: the GIN index lists them
                    extra, params = "", [conversation_id, tsquery, before]
                cursor.execute(sql.format(extra=extra), [*params, CANDIDATES_PER_QUERY])
                seqs = [row[0] for row in cursor.fetchall()]
                cut = walk and before > COMBINED_WINDOW + 1
                found.append(Candidates(seqs, len(seqs) < CANDIDATES_PER_QUERY and not cut))
        finally:  # the settings would last until the end of an enclosing transaction
            if walking is not None:
                cursor.execute("RESET enable_bitmapscan; RESET enable_sort; RESET enable_indexscan")
    return found


# --- Anything else: LIKE ---------------------------------------------------------------------


def _plain(
    conversation_id: str, queries: list[Query], before: int, *, windowed: bool
) -> list[Candidates]:
    found = []
    for query in queries:
        either = Q()
        for alternative in query:
            either |= Q(*(Q(content__icontains=word) for word in alternative))
        messages = Message.objects.filter(either, conversation_id=conversation_id, seq__lt=before)
        seqs = list(messages.order_by("-seq").values_list("seq", flat=True)[:CANDIDATES_PER_QUERY])
        found.append(Candidates(seqs, len(seqs) < CANDIDATES_PER_QUERY))
    return found


def backend() -> str:
    """Which search runs on this database: ``postgresql``, ``fts5`` or ``plain``."""
    if connection.vendor == "postgresql":
        return "postgresql"
    if connection.vendor == "sqlite" and _fts5_ready():
        return "fts5"
    return "plain"


FINDERS: dict[str, Finder] = {"postgresql": _postgres, "fts5": _fts5, "plain": _plain}


# --- Scoring ---------------------------------------------------------------------------------


def _document_frequency(candidates: Candidates, total: int) -> float:
    if candidates.complete or len(candidates.seqs) < 2:
        return max(1, len(candidates.seqs))
    span = max(candidates.seqs) - min(candidates.seqs) + 1  # the density of the newest
    return max(len(candidates.seqs), total * len(candidates.seqs) / span)


def search_messages(
    *, conversation_id: str, query: str, limit: int, before_seq: int | None = None
) -> list[dict[str, Any]]:
    """The best matches for ``query``'s keywords among the conversation's messages with
    ``seq < before_seq``, best first: dicts of seq, role, content, token_estimate,
    created_at and score. No keywords, no matches."""
    words = keywords(query)
    if not words or limit < 1:
        return []
    counts = (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("message_count", "last_seq")
        .first()
    )
    if counts is None:
        return []
    before = min(before_seq or NO_BOUND, counts[1] + 1)
    find = FINDERS[backend()]
    singles = find(conversation_id, [[(word,)] for word in words], before, windowed=False)
    found = dict(zip(words, singles, strict=True))
    listed = {word: set(candidates.seqs) for word, candidates in found.items()}
    seqs = set().union(*listed.values())
    # Common words list only their newest messages: look for them together, where a
    # message that has several of them is rare again. Those with all of them outscore
    # those with all but one, which are looked for only when the former are too few.
    common = [word for word in words if not found[word].complete]
    if len(common) >= 2:
        [together] = find(conversation_id, [[tuple(common)]], before, windowed=True)
        for word in common:
            listed[word].update(together.seqs)
        seqs.update(together.seqs)
        if len(common) >= 3 and len(together.seqs) < limit:
            all_but_one = list(itertools.combinations(common, len(common) - 1))
            [nearly] = find(conversation_id, [all_but_one], before, windowed=True)
            seqs.update(nearly.seqs)  # which words each has is read from its text below
    if not seqs:
        return []
    size = max(counts[0], len(seqs))
    weight = {
        word: math.log(1 + size / _document_frequency(candidates, size))
        for word, candidates in found.items()
    }
    # A word that starts like the keyword's stem: 'locker' finds 'lockers'.
    partial = [
        (word, re.compile(r"\b" + re.escape(_stem(word))))
        for word, candidates in found.items()
        if not candidates.complete
    ]
    texts = Message.objects.filter(conversation_id=conversation_id, seq__in=seqs).order_by()
    scored = []
    for seq, content in texts.values_list("seq", "content"):
        score = sum(weight[word] for word in words if seq in listed[word])
        if partial:
            text = content.lower()
            score += sum(
                weight[word]
                for word, starts in partial
                if seq not in listed[word] and starts.search(text)
            )
        scored.append((score, seq))
    best = {seq: score for score, seq in sorted(scored, reverse=True)[:limit]}
    rows = Message.objects.filter(conversation_id=conversation_id, seq__in=best).order_by()
    matches = [{**row, "score": round(best[row["seq"]], 3)} for row in rows.values(*MESSAGE_FIELDS)]
    return sorted(matches, key=lambda row: (row["score"], row["seq"]), reverse=True)
