"""Replies that borrow from the prompt's scaffolding instead of answering the conversation.

A small model, a base model above all, copies what its prompt shows it: the facts of the
system prompt's example conversation ("you don't have a bike in the shed"), its own
previous reply, or a plausible value that is not the one the user gave ("I like blue."
after "My favourite colour is teal."). :func:`borrowed` finds three such replies, whatever
the prompt style, by comparing the reply with the context the model was given:

* ``example``: the reply names a fact of the example conversation in the system prompt (a
  word of its ``User:``/``Assistant:`` lines that is not a common word) which nothing in
  the conversation says;
* ``repeat``: the reply is the previous reply again, while the user said something else;
* ``unsupported``: the user asks about something of their own ("What is my ...?") and
  every fact the reply names (a name, a number, a colour, a day, a month) is missing from
  the conversation: the model made the answer up, or took another value than the user's.

The chat agent asks again with sampling, and in the end answers the profile's
``unknown_reply`` rather than store such a reply (``conversations.chat_agent``).
"""

import re
from dataclasses import dataclass

from conversations.context import Context


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SENTENCE_END = re.compile(r"[.!?:;]+\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
# A line of an example conversation in the system prompt.
_EXAMPLE_LINE = re.compile(r"^\s*(?:user|assistant|human|ai)\s*:(.*)$", re.IGNORECASE | re.M)
# Words too common to be a fact of their own: function words, the small talk of an
# acknowledgement, and the words of asking and telling.
COMMON = _set(
    """
    a about above after again all also am an and any are as at be been before being below
    between both but by can could did do does doing don't done down during each else even
    ever every few for from further get gets go going good got great had has have having he
    her here hers herself him himself his how i i'm if in into is isn't it it's its itself
    just know known let like likes liked lot lots lovely made make many may me might mine
    more most much must my myself need never new nice no nor not now of off oh ok okay on
    once one only or other our ours out over own please quite really right said same say
    says see she should so some something sorry sound sounds still such sure tell telling
    than thank thanks that that's the their theirs them then there these they thing things
    this those though through to today told too two under until up us very was wasn't way
    we well went were what when where which while who whom whose why will with would yes
    yet you you're your yours yourself hear heard glad happy wonderful fine knowing
    remember remembers called call named name keep keeps kept long time day tomorrow
    yesterday user assistant answer question example conversation
    """
)
COLOURS = _set(
    "red orange yellow green blue purple violet pink brown black white grey gray teal "
    "turquoise cyan magenta beige navy maroon olive gold silver indigo lilac crimson"
)
DAYS = _set("monday tuesday wednesday thursday friday saturday sunday")
MONTHS = _set(
    "january february march april may june july august september october november december"
)
_CLOSED = COLOURS | DAYS | MONTHS
# "me" alone is not enough: "tell me something nice" asks about nothing of the user's.
_FIRST_PERSON = _set("i my mine myself i'm i've")
_QUESTION_START = _set(
    "what which where who whom whose when how do does did is are was were can could tell "
    "remind name"
)


@dataclass(frozen=True)
class Borrowed:
    """Why a reply cannot be stored: ``problem`` (see the module) and the words that show it."""

    problem: str
    words: tuple[str, ...] = ()

    def describe(self) -> str:
        said = f" ({', '.join(self.words)})" if self.words else ""
        return {
            "example": f"The reply repeats the prompt's example{said}.",
            "repeat": "The reply repeats the previous reply.",
            "unsupported": f"The reply names what the user never said{said}.",
        }[self.problem]


def words(text: str) -> list[str]:
    return [word.replace("\u2019", "'").lower() for word in _WORD.findall(text)]


def example_facts(system_prompt: str) -> frozenset[str]:
    """The facts of the example conversation in a system prompt: the uncommon words of its
    ``User:``/``Assistant:`` lines."""
    lines = " ".join(match.group(1) for match in _EXAMPLE_LINE.finditer(system_prompt))
    return frozenset(w for w in words(lines) if w not in COMMON and (len(w) > 2 or w.isdigit()))


def said(context: Context) -> set[str]:
    """Every word of the conversation the model was shown: the new message, the recent and
    retrieved messages, the summary and this job's tool exchange."""
    texts = [context.message.content, context.summary]
    texts += [item.content for item in (*context.recent, *context.retrieved)]
    texts += [turn.content for turn in context.exchange]
    return {word for text in texts for word in words(text)}


def _facts(reply: str) -> set[str]:
    """What a reply names as facts: names (capitalised words within a sentence that are not
    common; a sentence's first word may be any word), numbers, colours, days and months."""
    named = set()
    for sentence in _SENTENCE_END.split(reply):
        found = _WORD.findall(sentence)
        named |= {word.lower() for word in found[1:] if word[0].isupper()}
    named = {word.replace("\u2019", "'") for word in named} - COMMON
    return named | {w for w in words(reply) if w.isdigit() or w in _CLOSED}


def asks_about_the_user(message: str) -> bool:
    """Whether the message asks about something of the user's own ("What is my ...?")."""
    said_words = words(message)
    question = message.rstrip().endswith("?") or (
        bool(said_words) and said_words[0] in _QUESTION_START
    )
    return question and bool(_FIRST_PERSON & set(said_words))


def _same(one: str, other: str) -> bool:
    return words(one) == words(other)


def _previous_exchange(context: Context) -> tuple[str, str] | None:
    """The last reply in the window and the user's message it answered."""
    recent = context.recent
    for index in range(len(recent) - 1, 0, -1):
        if recent[index].role == "assistant":
            before = recent[index - 1]
            return (before.content if before.role == "user" else "", recent[index].content)
    return None


def borrowed(reply: str, context: Context, system_prompt: str) -> Borrowed | None:
    """Why ``reply`` borrows from the prompt rather than answering (see the module), or
    None when it does not."""
    shown = said(context)
    reply_words = set(words(reply))
    copied = sorted((reply_words & example_facts(system_prompt)) - shown)
    if copied:
        return Borrowed("example", tuple(copied))
    previous = _previous_exchange(context)
    if previous is not None:
        asked, answered = previous
        if _same(reply, answered) and not _same(context.message.content, asked):
            return Borrowed("repeat")
    if asks_about_the_user(context.message.content):
        facts = _facts(reply)
        if facts and not facts & shown:
            return Borrowed("unsupported", tuple(sorted(facts)))
    return None
