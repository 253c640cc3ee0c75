"""Replies that speak as a person rather than as the assistant (``persona`` in
``conversations.borrowing``).

A small model continuing a transcript copies the shape of the user's turn: to "Hi there!
I'm Nadia, I work as a nurse." it answers "Hi there! I'm Sarah.", speaking as the user or
as someone it made up. :func:`speaks_as_someone` finds a reply that names itself or says
what it is when the profile gives it no such name or role, and one whose first-person
sentence opens as one of the user's.
"""

import re

from conversations.wording import COMMON, FIRST_PERSON, words

# A reply naming itself ("I'm Sarah") or its role ("I'm a waiter."), opening a clause
# (after "You said:" it reports the user's words).
_CLAUSE = r"(?:^|[.!?,;]\s+|\band\s+)"
_INTRODUCES = re.compile(
    _CLAUSE + r"(?i:i(?:['\u2019]?m| am)|my name(?: is|['\u2019]s)|call me)\s+([A-Z][\w'\u2019-]*)"
)
_CLAIMS_ROLE = re.compile(
    _CLAUSE + r"(?:i work as (?:a |an )?(?:\w+ )?|i(?:['\u2019]?m| am) an? )(\w+)"
    r"(?=\s*(?:[.,!;]|$)|\s+(?:in|at|from|and|for|by)\b)",
    re.IGNORECASE,
)
# The opening words a first-person sentence shares with a user's that copy its shape.
_MIRRORED_WORDS = 3
# Where a sentence ends; not at a colon: "Noted: my dog ..." reports the user's words.
_SENTENCE_END = re.compile(r"[.!?]+\s+|\n+")


def _openings(text: str) -> set[tuple[str, ...]]:
    """The first words of each sentence of ``text`` that speaks in the first person, when
    one of them is not a common word ("I am happy ..." is anyone's)."""
    found = [words(sentence)[:_MIRRORED_WORDS] for sentence in _SENTENCE_END.split(text)]
    found = [w for w in found if len(w) == _MIRRORED_WORDS and w[0] in FIRST_PERSON]
    return {tuple(w) for w in found if set(w) - COMMON}


def speaks_as_someone(
    reply: str, told: list[str], profile_text: str, *, question: bool
) -> tuple[str, ...] | None:
    """What shows that ``reply`` speaks as someone other than the assistant: the names or
    roles it gives itself that ``profile_text`` (the system prompt without its example
    conversation) does not; or the opening words of a first-person sentence it shares
    with one of ``told`` (the user's messages). None when it speaks as the assistant.

    To a ``question`` the user's own words said back in the first person answer it ("I'm
    flying to Reykjavik." to "Where am I travelling?"): only a name or role that none of
    ``told`` gives counts then."""
    own = set(words(profile_text))
    if question:
        own.update(*(words(text) for text in told))
    names = [m.group(1) for m in (*_INTRODUCES.finditer(reply), *_CLAIMS_ROLE.finditer(reply))]
    invented = tuple(n for n in names if words(n)[0] not in COMMON | own)
    if invented or question:
        return invented or None
    mirrored = _openings(reply) & set().union(*(_openings(text) for text in told))
    return tuple(sorted(mirrored)[0]) if mirrored else None


def introduced_names(text: str) -> set[str]:
    """The names ``text`` gives its speaker, lower-cased ("Hi! I'm Ines": {"ines"})."""
    found = (words(m.group(1))[0] for m in _INTRODUCES.finditer(text))
    return {name for name in found if name not in COMMON}
