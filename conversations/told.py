"""What the user told, as the reply checks read it (``conversations.borrowing``): their
messages in a context, the words they said, and the things they name as their own ("my
sister's wedding", "I have a cat")."""

import re
from collections.abc import Callable, Collection

from conversations.alike import own_kin
from conversations.context import Context, Item
from conversations.wording import (
    CLOSED,
    COMMON,
    QUESTION_START,
    SENTENCE_END,
    content_words,
    facts,
    stem,
    word_set,
    words,
)

# Words that make what follows the user's own thing ("my sister", "our greyhound").
_OWN = word_set("my our")
# A message telling of a thing the user has, without "my" ("I have a cat named Saffron.",
# "I have two rabbits.").
_HAS = re.compile(
    r"\b(?:i|we)(?:['\u2019]ve)? (?:have|own|adopted|bought|got) (?:an?|some|several|a few|"
    r"\d+|two|three|four|five|six|seven|eight|nine|ten) ((?:\w+ ){0,2}\w+)",
    re.IGNORECASE,
)


def asked_subject(message: str) -> tuple[str, ...]:
    """What a question names as the user's own, by stem: after the first "my"/"our" (and
    a common word such as "new"), the owners of a chain and the thing they own ("my
    sister's wedding": sister, wedding), or the one word that is not common ("my seat
    number": seat); () when it names nothing uncommon ("my name"). Without "my"/"our",
    from a relative named as the user's own ("granny's job": granny, job; ``alike.own_kin``)."""
    found = words(message)
    if _OWN & set(found):
        start = next(index for index, word in enumerate(found) if word in _OWN) + 1
    elif (start := own_kin(found)) is None:
        return ()
    run: list[str] = []
    for word in found[start : start + 4]:
        if word in COMMON or word in QUESTION_START:
            if run:
                break
            continue
        run.append(stem(word))
        if not word.endswith("'s"):
            break
    return tuple(run)


def possessed(message: str) -> tuple[str, ...]:
    """What a message says the user has without "my", by stem ("I have a black cat named
    Saffron.": cat), or ()."""
    found = _HAS.search(message)
    kept = [w for w in words(found.group(1)) if w not in COMMON | CLOSED] if found else []
    return (stem(kept[0]),) if kept else ()


def user_words(context: Context) -> set[str]:
    """The stems of the content words the user said before the new message (their messages
    in the context) and of the summary."""
    told = [item.content for item in user_items(context)]
    return set().union(content_words(context.summary), *(content_words(text) for text in told))


# The shortest stem that names the same thing as a longer word it begins ("account" in
# "accountant", "cook" in "cookery"; not "son" in "sonata").
_SAME_ROOT = 4


def named(thing: str, told: Collection[str]) -> bool:
    """Whether a stem is among ``told``, alone, as the last part of a compound ("fish" in
    "goldfish"), or as the root of a longer word or a longer word's root ("account" and
    "accountant")."""
    return any(
        word == thing
        or (len(thing) > 2 and word.endswith(thing))
        or (
            min(len(word), len(thing)) >= _SAME_ROOT
            and (word.startswith(thing) or thing.startswith(word))
        )
        for word in told
    )


def _surface(thing: str, text: str) -> str:
    """The word of ``text`` whose stem is ``thing`` ("bicycle" for "bicycl"), or ``thing``."""
    return next((word for word in words(text) if stem(word) == thing), thing)


def names_subject(
    subject: Collection[str],
    question: str,
    own: Collection[str],
    held: str,
    alike: Callable[[str, str], bool] | None = None,
) -> bool:
    """Whether a message of the user's (``held``, naming ``own`` as theirs) names what a
    question asks about (``subject``, :func:`asked_subject`): by word (:func:`named`), or,
    given ``alike``, a word of the subject and one of ``own`` name the same thing ("my
    bicycle" and "My bike ...", ``conversations.alike``)."""
    if any(named(thing, content_words(held)) for thing in subject):
        return True
    asked = [_surface(thing, question) for thing in subject]
    told = [_surface(thing, held) for thing in own]
    return alike is not None and any(alike(one, other) for one in asked for other in told)


def unknown_names(context: Context, reply: str) -> tuple[str, ...]:
    """The names a question asks about that nothing before it in the context names (the
    summary, the recent and retrieved messages), when the reply names other names: it
    answers from something else ("You were in Tallinn in March." to "Which hotel did I
    stay at in Riga?"; not "Japanese, for two years." to "How long have I been learning
    Japanese?" after "For two years now."). Days, months and numbers are no names here."""
    earlier = [item.content for item in (*context.recent, *context.retrieved)]
    said = set(words(" ".join([context.summary, *earlier])))
    asked = {fact for fact in facts(context.message.content) if not fact.isdigit()} - CLOSED
    answered = {fact for fact in facts(reply) if not fact.isdigit()} - CLOSED
    unknown = asked - said
    return tuple(sorted(unknown)) if unknown and answered - asked else ()


def _users(item: Item, context: Context) -> bool:
    return item.role == "user" and item.seq != context.message.seq


def user_items(context: Context) -> list[Item]:
    """The user's messages in the context before the new one."""
    return [item for item in (*context.recent, *context.retrieved) if _users(item, context)]


# A sentence that says what a thing is or was ("My oldest friend, Benedikt, is a firefighter.").
_COPULA = re.compile(r"\b(?:is|was|are|were)\b", re.IGNORECASE)


def said_of(text: str, asked: Collection[str]) -> str:
    """What a message says of what is asked (stems): of a sentence that says what a thing
    is, when the words before "is" name what is asked, only what follows and the names
    before it ("Benedikt a firefighter" of "My oldest friend, Benedikt, is a firefighter."
    to "What does Benedikt do?": "friend" says who he is, not what he does); any other
    sentence whole."""
    kept = []
    for sentence in SENTENCE_END.split(text):
        parts = _COPULA.split(sentence, maxsplit=1)
        if len(parts) == 2 and any(named(word, content_words(parts[0])) for word in asked):
            kept.append(" ".join([*sorted(facts(parts[0])), parts[1]]))
        else:
            kept.append(sentence)
    return " ".join(kept)
