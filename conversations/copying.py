"""Replies that say again what the conversation said instead of answering it: the previous
reply (``repeat`` in ``conversations.borrowing``), or most of the words of a message about
something else (``copied``).

A small model continuing a transcript repeats what it read. Asked "When is the electrician
coming?" with nothing about an electrician in its prompt, it answers "I think it was moved
on Monday near the kitchen, together with the broken teapot.": the shape and most of the
words of an earlier message about a team lunch. Closeness to the question does not tell
such a reply from a terse right one (both can be far from the question in meaning), but
the message it copies does: it is about something else than the question, and names
nothing the question asks about. A long right answer that copies the message holding it
is refused too when the embedder puts that message far from the question: it is asked
again, then the user's sentence about what is asked is quoted if there is one
(``conversations.quoting``).
"""

from collections.abc import Collection

from conversations.asking import ABSTAINS, asks_back, is_question
from conversations.context import Context, Item
from conversations.told import named
from conversations.wording import content_words, words

# A reply copies a message when at least this share of its words are words of that message,
COPIED_SHARE = 0.6
# and it has at least this many words: a short answer shares its few words with the
# message that holds it by right, even when the embedder puts that message far from the
# question ("The plumber came round on Monday." to "When was the tradesman here?").
COPIED_WORDS = 10


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


def repeats_previous(reply: str, context: Context) -> bool:
    """Whether ``reply`` is the previous reply again while the user said something else;
    not "I don't know." again to a question: an honest abstention borrows nothing."""
    previous = _previous_exchange(context)
    if previous is None:
        return False
    asked, answered = previous
    again = _same(reply, answered) and not _same(context.message.content, asked)
    honest = is_question(context.message.content) and ABSTAINS.search(reply) is not None
    return again and not honest


def copied_message(reply: str, context: Context, far: Collection[int]) -> Item | None:
    """The message of the context that ``reply`` to a question copies (see the module), or
    None: one about something else than the question (its seq in ``far``) and naming none
    of its words, that holds at least ``COPIED_SHARE`` of the words of a reply of at least
    ``COPIED_WORDS`` words, which does not say it does not know."""
    said = words(reply)
    if len(said) < COPIED_WORDS or ABSTAINS.search(reply):
        return None
    if not asks_back(context.message.content):
        return None
    asked = content_words(context.message.content)
    for item in (*context.recent, *context.retrieved):
        if item.seq not in far:
            continue
        held = content_words(item.content)
        if any(named(word, held) for word in asked):
            continue
        shown = set(words(item.content))
        if sum(word in shown for word in said) >= COPIED_SHARE * len(said):
            return item
    return None
