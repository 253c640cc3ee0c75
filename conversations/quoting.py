"""The user's own words, quoted, where the model could not answer from them.

A small model asked "Which hue do I like best?" often fails to answer from "My favourite
colour is teal." although the message is in its prompt: it says it does not know, or its
replies are refused by the reply checks (``conversations.borrowing``) until the agent gives
up. Then, beside its "I don't know." the agent quotes what the user said about it: the sentence of
theirs that the question asks about, "I don't know. You told me: “My favourite colour is
teal.”". The agent could not check that the sentence answers the question, so it
says that it does not know; the quote says only what the user said, and says so.

:func:`told_sentence` finds that sentence, or none:

* only to a question that asks to be told something back ("What is my ...?", "Where is
  the June lodge?": ``asking.asks_back``), not about the assistant ("What is your name?");
* among the user's messages in the context that the question asks about (they share a
  content word with it, or are among the closest in meaning: ``borrowing.told_about``),
  and, with vectors, only those about as close in meaning as the closest (``relevant``)
  and those after them (an update may say the new value in other words);
* of those, a short message, or a longer one's sentences, that names what the question
  names as the user's own ("my grandson": ``told.asked_subject``; "My work is dull." is
  not about "my sister's work"), or, when it names nothing so, a content word of it; or a
  short message among the closest in meaning; never a question;
* only one that names a fact of the kind the question asks for, if it asks for a colour,
  a time or a number ("The garden was busy, ..." is no answer to "What colour is our
  garden shed?": ``asking.fits_kind``);
* the newest wins: a later message on the same thing is the update ("I swapped lockers,
  mine is 205 now." after "My locker is 112.");
* a retrieved message of the user's that the prompt marks ``most recent`` (the newest of
  several found about what the question is about: ``conversations.arrange``) is about
  it whatever its words, and wins over the older ones ("Dr. Pennington moved practices,
  so Anouk Verhoeven sees to my spine now." to "Who treats my back?", not "My
  chiropractor is Dr. Pennington.").
"""

from collections.abc import Collection

from agents.replies import sentences
from conversations.arrange import LATEST
from conversations.asking import ABSTAINS, asks_back, fits_kind, is_question
from conversations.borrowing import ABSTENTION_WORDS, told_about
from conversations.context import Context, Item
from conversations.models import Role
from conversations.told import asked_subject, named
from conversations.wording import FIRST_PERSON, SECOND_PERSON, content_words, words

QUOTE = "{unknown} You told me: “{sentence}”"
# A sentence longer than this is a story, not the fact asked for.
MAX_WORDS = 20


def told_sentence(
    context: Context,
    similar: Collection[int],
    relevant: Collection[int] | None,
    stale: Collection[int] = (),
    *,
    marked_only: bool = False,
    unrelated: Collection[int] = (),
) -> str | None:
    """The sentence of the user's that answers the new message, quoted as the user said it
    (see the module); None when the message asks nothing back of theirs or nothing fits.
    ``similar``: the seqs closest in meaning to it; ``relevant``: the user's messages about
    as close as the closest (None without vectors: any that shares a word); ``stale``: the
    messages whose value a later one changed (``conversations.outdated``), never quoted;
    ``marked_only``: only a retrieved message marked the most recent is (the reply checks
    found that the user never named what is asked: "back" for "spine"); ``unrelated``:
    the messages known to be far from it in meaning (``closeness.unrelated_seqs``), which
    are no update of the closest ("Here is the log: ... worker ..." to "Where does
    Ludmila work?")."""
    question = context.message.content
    if not asks_back(question) or _asks_the_assistant(question):
        return None
    asked, subject = content_words(question), asked_subject(question)
    best: tuple[int, str] | None = None
    # A message after the newest of the closest in meaning may be its update.
    after = max(relevant, default=None) if relevant is not None else None
    for item in _candidates(context, similar, unrelated):
        marked = item.mark == LATEST
        if item.role != Role.USER or item.seq in stale or (marked_only and not marked):
            continue
        if (
            relevant is not None
            and item.seq not in relevant
            and (after is None or item.seq < after or item.seq in unrelated)
            and not marked
        ):
            continue
        for part in _parts(item.content):
            if not fits_kind(part, question):
                continue
            held = content_words(part)
            # What the question names as theirs, or else a word of it, named; or a short
            # message among the closest in meaning ("I'm the banjo player in a bluegrass
            # group." to "What's my instrument in the bluegrass group?") or marked the
            # most recent of those retrieval found about it.
            about = any(named(word, held) for word in subject or asked) or (
                part == item.content.strip() and (item.seq in similar or marked)
            )
            if about and (best is None or item.seq > best[0]):
                best = (item.seq, part)
    return None if best is None else best[1]


def _candidates(
    context: Context, similar: Collection[int], unrelated: Collection[int]
) -> list[Item]:
    """The messages the question asks about (``borrowing.told_about``), and the retrieved
    one marked the most recent."""
    found = told_about(context, similar, unrelated)
    seen = {item.seq for item in found}
    marked = [item for item in context.retrieved if item.mark == LATEST and item.seq not in seen]
    return found + marked


def _asks_the_assistant(question: str) -> bool:
    """Whether a question asks about the assistant ("What is your name?"), not the user."""
    said = set(words(question))
    return bool(said & SECOND_PERSON) and not said & FIRST_PERSON


def _parts(text: str) -> list[str]:
    """What of a message may be quoted: the whole of a short one, else its short
    sentences; never a question."""
    if len(text.split()) <= MAX_WORDS:
        parts = [text.strip()]
    else:
        parts = [text[start:end].strip() for start, end in sentences(text)]
    return [part for part in parts if len(part.split()) <= MAX_WORDS and not is_question(part)]


def only_abstains(reply: str) -> bool:
    """Whether a reply only says it does not know ("I'm not sure.", at most
    ``borrowing.ABSTENTION_WORDS`` words)."""
    return bool(ABSTAINS.search(reply)) and len(words(reply)) <= ABSTENTION_WORDS


def quoted(unknown: str, sentence: str) -> str:
    """The reply that says it does not know (``unknown``, the profile's words) and quotes
    the user's sentence."""
    return QUOTE.format(unknown=unknown, sentence=sentence)
