"""Names in messages, for the second round of retrieval: "My sister is Ana." names Ana,
and the messages about Ana ("Ana lives in Oslo.") share no word with a question about
the sister."""

import re

from conversations.search import STOPWORDS

# A capitalised word (of any alphabet's letters: "Joaquín") that does not start a
# sentence, or one that starts it in the possessive ("Ana's birthday").
_UPPER = "A-ZÀ-ÖØ-Þ"
_WORD = rf"[{_UPPER}][^\W\d_{_UPPER}]{{2,}}"
_INSIDE = re.compile(rf"(?<![.!?:]\s)(?<!^)(?<![.!?:])\b({_WORD})\b")
_POSSESSIVE = re.compile(rf"(?:^|[.!?]\s+)({_WORD})'s\b")
# Capitalised, but not names of anything a second search would narrow down.
_CALENDAR = frozenset(
    (
        *("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        *("january", "february", "march", "april", "may", "june", "july"),
        *("august", "september", "october", "november", "december"),
    )
)


def names(texts: list[str], *, exclude: str = "") -> list[str]:
    """The distinct names in ``texts``, in order, that ``exclude`` (the question) does not
    mention."""
    asked = exclude.lower()
    found: list[str] = []
    for text in texts:
        for match in [*_POSSESSIVE.finditer(text), *_INSIDE.finditer(text)]:
            name = match.group(1)
            lowered = name.lower()
            if lowered in STOPWORDS or lowered in _CALENDAR or lowered in asked or name in found:
                continue
            found.append(name)
    return found


_CAPITALISED = re.compile(rf"\b({_WORD})\b")


def capitalised(text: str, *, exclude: str = "") -> list[str]:
    """The distinct capitalised words of ``text`` (a sentence's first word too), in order,
    but stopwords, days and months, and those ``exclude`` mentions: names, and some words
    that only start a sentence (a caller tells them apart by how many messages have them)."""
    asked = exclude.lower()
    found: list[str] = []
    for word in _CAPITALISED.findall(text):
        lowered = word.lower()
        if lowered in STOPWORDS or lowered in _CALENDAR or lowered in asked or word in found:
            continue
        found.append(word)
    return found
