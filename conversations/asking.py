"""What a message asks, as the reply checks read it (``conversations.borrowing``): whether it
is a question, whether it asks something of the user's own, or to be told something back;
and whether a reply has the shape of an answer: it says it does not know, or names a number,
a time or a colour where one is asked, says nothing is so of what the user told, or
answers a question about someone as the assistant itself."""

import re
from collections.abc import Collection

from conversations.alike import own_kin
from conversations.told import named
from conversations.wording import (
    CLOSED,
    COLOURS,
    COMMON,
    FIRST_PERSON,
    QUESTION_START,
    SECOND_PERSON,
    WORD,
    asks_for_a_number,
    asks_when,
    content_words,
    facts,
    names_a_number,
    names_a_time,
    word_set,
    words,
)

# A question that asks to be told something back, among its first words ("In which city
# ...?"); one that asks for advice or a suggestion has no answer in the conversation.
_RECALL = word_set("what which where who whom whose when how what's where's who's when's remind")
_ADVICE = word_set("should could would might recommend suggest suggestion idea ideas")
_RECALL_WORDS = 3
# A reply that says it does not know: honest, never ungrounded.
ABSTAINS = re.compile(
    r"\b(?:don'?t know|do not know|not sure|no idea|(?:can'?t|cannot) (?:say|tell|remember)"
    r"|don'?t remember|(?:didn'?t|never) (?:tell|told|say|said|mention)"
    r"|haven'?t (?:told|said|mentioned))",
    re.IGNORECASE,
)

# A short reply that doubts what it was told ("I don't think so.").
DOUBTS = re.compile(r"\b(?:do|did)(?:n'?t| not) think so\b|\bdoubt (?:it|that)\b", re.IGNORECASE)


def is_question(message: str) -> bool:
    """Whether a message asks something: it ends in "?" or opens with a question's word."""
    first = words(message)[:1]
    return message.rstrip().endswith("?") or bool(QUESTION_START.intersection(first))


def asks_about_the_user(message: str) -> bool:
    """Whether the message asks about something of the user's own ("What is my ...?", or
    of their relatives named without "my": "What was granny's job?")."""
    found = words(message)
    return is_question(message) and (bool(FIRST_PERSON & set(found)) or own_kin(found) is not None)


def asks_back(message: str) -> bool:
    """Whether a message asks to be told something ("What/which/where ...?"), not for
    advice: of the user's own or not ("What's the door code?")."""
    said_words = words(message)
    recall = bool(_RECALL & set(said_words[:_RECALL_WORDS]))
    return recall and not _ADVICE & set(said_words)


def question_part(message: str) -> tuple[str, str]:
    """A message's sentences that ask, and those that tell ("My dog is Rex. What is he
    called?"); the whole message asks when no sentence ends in "?"."""
    sentences = re.split(r"(?<=[.!?])\s+", message.strip())
    asking = [s for s in sentences if s.endswith("?")]
    telling = [s for s in sentences if not s.endswith("?")]
    return (" ".join(asking), " ".join(telling)) if asking else (message, "")


def without_kind(reply: str, message: str, told: Collection[str] = ()) -> str | None:
    """``no_number`` or ``no_time`` when a question asks back for a number or a time and
    the reply names none, without saying it does not know ("It's a Skoda." to "What is my
    car's registration number?"), or None; None for a number too when a message of the
    user's (``told``) holds every word of the question and names no number: what they
    told of it is none ("What is my bank PIN hint?" after "My bank PIN hint is pumpkin.";
    not "How old is my niece?" after "My niece lives in Cardiff.")."""
    question = question_part(message)[0]
    if not asks_back(question) or ABSTAINS.search(reply):
        return None
    if asks_for_a_number(question) and not names_a_number(reply):
        asked = content_words(question)
        about = [text for text in told if all(named(w, content_words(text)) for w in asked)]
        return None if asked and about and not any(map(names_a_number, about)) else "no_number"
    return "no_time" if asks_when(question) and not names_a_time(reply) else None


_COLOUR_WORDS = word_set("colour color colours colors")
# A reply that says something is not so ("I don't sing tenor."); a message of the user's
# that does ("I don't eat meat.") may be answered so.
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|nowhere)\b|n['\u2019]t\b", re.IGNORECASE
)
_WHO = word_set("who who's whom")
# A reply that promises an answer instead of giving one ("I'll tell you about it.").
_DEFERS = re.compile(
    r"\b(?:i['\u2019]?ll|i will|let me)\s+(?:tell|check|find|look|get back|let you know)\b",
    re.IGNORECASE,
)


def _names(text: str) -> set[str]:
    """The capitalised words of a text that are not common, a sentence's first too."""
    found = {word.lower() for word in WORD.findall(text) if word[0].isupper()}
    return found - COMMON - QUESTION_START - CLOSED


def _about(question: str, told: Collection[str]) -> list[str]:
    """The messages of ``told`` that hold a word of the question (its colour words aside)."""
    asked = content_words(question) - _COLOUR_WORDS
    return [text for text in told if any(named(w, content_words(text)) for w in asked)]


def asks_kind_told(message: str, told: Collection[str]) -> str | None:
    """The kind of fact the new message asks back of something a message of the user's
    (``told``) names: ``number`` ("What numbers open the bike lock?" after "The bike lock
    combination is 6381."), ``colour`` ("What colour is the stair carpet?" after "We
    carpeted the stairs in burgundy."), ``time`` ("Which day is the roof being mended?"
    after "The roofer is booked for Thursday."), or None."""
    question = question_part(message)[0]
    kind = "number" if asks_for_a_number(question) else None
    kind = kind or ("colour" if _COLOUR_WORDS & set(words(question)) else None)
    kind = kind or ("time" if asks_when(question) else None)
    if kind is None or not asks_back(question):
        return None
    return kind if _about(question, told) else None


def fits_kind(text: str, question: str) -> bool:
    """Whether ``text`` names a fact of the kind ``question`` asks for: a colour, a time
    (a day, a month, a number or a word of time), or a number, unless ``text`` holds every
    word of the question ("My PIN hint is pumpkin." to "What is my PIN hint?"); True when
    it asks for none of them."""
    if _COLOUR_WORDS & set(words(question)):
        return bool(COLOURS & set(words(text)))
    if asks_when(question):
        return names_a_time(text)
    if asks_for_a_number(question):
        held = content_words(text)
        return names_a_number(text) or all(named(w, held) for w in content_words(question))
    return True


def wrong_shape(reply: str, message: str, told: Collection[str] = ()) -> str | None:
    """Why a reply to a question that asks to be told something back cannot be its answer,
    or None: ``deferred``, promising an answer and naming no fact ("I'll tell you about
    it." to "Which painkiller did the doctor prescribe me?"); ``no_colour``, naming no
    colour to a question for the colour of something the user told in one ("It is very
    dark." after "We painted the fence ochre."); ``persona``, the assistant naming itself
    to a question about someone else ("I'm the tuner." to "Who tunes the harpsichord?";
    "My name is Lukas." to "What is Lukas's surname?");
    ``no_name``, naming no one to a question who, when a message of the user's about it
    names someone ("I think you're right." after "Bertrand tunes my harpsichord.");
    ``denied``, saying something is not so when no message of the user's about it
    (``told``) does ("I'm sorry, I don't sing tenor." after "I sing tenor in the cathedral
    choir.")."""
    question = question_part(message)[0]
    if not asks_back(question) or ABSTAINS.search(reply) or DOUBTS.search(reply):
        return None
    if _DEFERS.search(reply) and not facts(reply):
        return "deferred"
    asked, answered = set(words(question)), words(reply)
    about = _about(question, told)
    told_colour = any(COLOURS & set(words(text)) for text in about)
    if _COLOUR_WORDS & asked and told_colour and not COLOURS & set(answered):
        return "no_colour"
    itself = answered[:1] == ["i'm"] or answered[:2] in (["i", "am"], ["my", "name"])
    someone = not SECOND_PERSON & asked and (_WHO & asked or not FIRST_PERSON & asked)
    if someone and itself:
        return "persona"
    if someone and _WHO & asked and any(_names(t) for t in about) and not _names(reply):
        return "no_name"
    if _NEGATION.search(reply) and not any(_NEGATION.search(text) for text in about):
        return "denied"
    return None
