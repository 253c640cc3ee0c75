"""Replies that borrow from the prompt's scaffolding instead of answering the conversation.

A small model, a base model above all, copies what its prompt shows it: the example
conversation's facts ("you don't have a bike in the shed"), its previous reply, a value
not the user's ("I like blue." after "My favourite colour is teal."). :func:`borrowed`
finds such replies, whatever the prompt style, by comparing them with the model's context:

* ``example``: the reply names a fact of the system prompt's example conversation (a word
  of its ``User:``/``Assistant:`` lines, not a common word) or a tool of its tool list
  ("The assistant can use the calculator ..."), which nothing in the conversation says;
* ``repeat``: the reply is the previous reply again, while the user said something else
  (but "I don't know." again to a question: an honest abstention borrows nothing);
* ``copied``: to a question, the reply says again most of the words of a message about
  something else (by closeness in meaning) that names nothing it asks about ("I think it
  was moved on Monday near the kitchen, ..." to "When is the electrician coming?";
  ``conversations.copying``);
* ``persona``: the reply speaks as a person, not as the assistant: it gives itself a name
  or role the system prompt does not ("Hi there! I'm Sarah." to "Hi there! I'm Nadia.",
  "I'm a waiter."), or a first-person sentence of it opens as one of the user's ("I work
  at a bank." after "I work at a school."): it copied the shape of the user's turn (to a
  question, only a name or role the user never gave: "I'm flying to Oslo." answers);
* ``unsupported``: the user asks about something of their own ("What is my ...?") and
  every fact the reply names (a name, a number, a colour, a day, a month) is missing from
  the conversation, or any number it names is ("It's a 1998 Skoda." to "What is my car's
  registration number?"; "twenty-one" is 21, one number): the model made the answer up,
  or took another value than the user's; so is a number (a colour) missing from the
  conversation in a reply to a question that asks back for a number (a colour) of what a
  message of the user's names ("It's 4471." to "What numbers open the bike lock?"; "It's
  grey." to "What colour is the stair carpet?"), or a time (a day, a month, digits: "It's
  the 15th." to "Which day is the roof being mended?", checked after the others);
* ``ungrounded``: the user asks to be reminded of something of their own ("What/which/
  where ... my ...?", not for advice nor a yes or no), and the reply uses no word of the
  messages about it (:func:`told_about`) beyond the question's ("I have a code for your
  locker." after "My locker code is 4821."): it did not answer from them;
* ``unfounded``: the user asks to be told something back about their own things or about
  what they told ("Who do I rent from?"; "What does Benedikt do?": a message of theirs
  holds every word of the question), and no word of the reply beyond the question's own is in
  what the user said about it (the summary, and their messages in the context that are
  about what is asked: :func:`told_about` with the caller's ``relevant``, the closest in
  meaning; any of theirs without vectors; the assistant's too when the question asks what
  "you" said): "You rent from this place." after "My landlady's name is Mrs. Abernathy.";
  "I rent from the library." from a long turn about a morning; "I don't have a code."
  answers nothing. Of a message that says what a thing is, when the words before "is"
  name what is asked, those words (its names aside) say which thing it is, not what is
  asked of it: "He's a good friend." to "What does Benedikt do?" after "My oldest friend,
  Benedikt, is a firefighter." (``told.said_of``);
* ``never_said``: such a question names a thing of the user's own ("Where does my sister
  live?", :func:`asked_subject`) that no message of the user's in the context names, and
  the reply answers rather than saying it does not know; or it names a name that nothing
  before it names and the reply names others ("You were in Tallinn." to "Which hotel did
  I stay at in Riga?", ``told.unknown_names``): nothing the model was shown can support an
  answer, so asking again cannot help;
* ``elsewhere``: the reply's answer is taken from what the user said about something
  else: every message of the user's that holds a word of the reply (beyond the question's
  own) names none of what the question asks about ("Leeds" from "My brother lives in
  Leeds." to "Where does my sister live?");
* ``outdated``: a message of the user's after the last one that holds the reply's answer
  is on what is asked and names a newer value of its kind, or tells a change in so many
  words ("The wedding has been pushed back to September."; "I sold the Peugeot and bought a
  Mazda."): the user changed the fact since. Judged for any question that asks to be told
  something back, of the user's own or not (``conversations.outdated``);
* ``no_number``: to a question that asks back for a number ("What's my seat number?",
  "How old is my niece?"), a reply that names none ("It's a Skoda."), in digits or words,
  and does not say it does not know, unless a message of the user's that holds all the
  question's words names none ("What is my PIN hint?" after "My PIN hint is pumpkin.");
  ``no_time`` likewise to one that asks when ("When is the heating man visiting?"), a
  reply naming no time, day, month or number ("He's coming to the office.");
* last, to a question that asks something back: ``deferred`` ("I'll tell you about
  it."), ``no_colour``, ``persona`` (the assistant naming itself to "Who ...?"),
  ``no_name``, ``denied`` ("I don't sing tenor." after "I sing tenor."), see
  ``asking.wrong_shape``;
* ``abstained``: to a message that tells something of the user's own or greets and asks
  nothing ("I just adopted a kitten."), a short reply that only says it does not know
  ("I don't know."): there was nothing to know.

The chat agent asks again (but after ``never_said``), then gives the profile's
``unknown_reply`` or ``acknowledgement_reply`` instead (``conversations.chat_agent``).
"""

import re
from collections.abc import Collection
from dataclasses import dataclass

from conversations.alike import Alike
from conversations.asking import ABSTAINS as _ABSTAINS
from conversations.asking import (
    DOUBTS,
    asks_about_the_user,
    asks_back,
    asks_kind_told,
    is_question,
    question_part,
    without_kind,
    wrong_shape,
)
from conversations.context import Context, Item
from conversations.copying import copied_message, repeats_previous
from conversations.frame import EXAMPLE_LINE, example_facts
from conversations.outdated import changed_own, changes_of, left_out, outdated
from conversations.persona import introduced_names, speaks_as_someone
from conversations.told import (
    asked_subject,
    named,
    names_subject,
    possessed,
    said_of,
    unknown_names,
    user_items,
    user_words,
)
from conversations.wording import (
    COMMON,
    FIRST_PERSON,
    SECOND_PERSON,
    content_words,
    fact_kind,
    facts,
    numbers,
    word_set,
    words,
)

_GREETING = word_set("hi hello hey")
# A question that asks for more talk on a subject, not for a fact.
_FOLLOW_UP = re.compile(r"\W*(?:what|how) about\b", re.IGNORECASE)
_FACTS_OF = {"number": ("number",), "colour": ("colour",), "time": ("day", "month", "number")}
_DIGITS = re.compile(r"\d+")
# A reply that says no more than it does not know is at most this many words.
ABSTENTION_WORDS = 8


@dataclass(frozen=True)
class Borrowed:
    """Why a reply cannot be stored: ``problem`` (see the module) and the words that show it."""

    problem: str
    words: tuple[str, ...] = ()

    def describe(self) -> str:
        said = f" ({', '.join(self.words)})" if self.words else ""
        return {
            "example": f"The reply repeats the prompt's example or tool list{said}.",
            "repeat": "The reply repeats the previous reply.",
            "copied": f"The reply copies a message about something else{said}.",
            "persona": f"The reply speaks as someone other than the assistant{said}.",
            "unsupported": f"The reply names what the user never said{said}.",
            "ungrounded": f"The reply uses nothing of what the conversation said about it{said}.",
            "unfounded": "The reply names nothing the user said.",
            "never_said": f"The user never said anything of what the question asks about{said}.",
            "elsewhere": f"The reply answers from what the user said of another thing{said}.",
            "outdated": f"The user said something newer about it{said}.",
            "abstained": "The reply says it does not know, to a message that asks nothing.",
            "no_number": "The reply names no number, to a question that asks for one.",
            "no_time": "The reply names no time, to a question that asks when.",
            "no_colour": "The reply names no colour, to a question that asks for one.",
            "no_name": "The reply names no one, to a question that asks who.",
            "denied": "The reply says something is not so, which the user never said.",
            "deferred": "The reply promises an answer instead of giving one.",
        }[self.problem]


def said(context: Context) -> set[str]:
    """Every word of the conversation the model was shown (the new message, the recent and
    retrieved messages, the summary and this job's tool exchange), and the numbers it names
    in words, in digits ("twenty-one": "21")."""
    texts = [context.message.content, context.summary]
    texts += [item.content for item in (*context.recent, *context.retrieved)]
    texts += [turn.content for turn in context.exchange]
    return {found for text in texts for found in (*words(text), *numbers(text))}


def abstains_unasked(reply: str, message: str) -> bool:
    """Whether ``reply`` only says it does not know, or doubts it (at most
    ``ABSTENTION_WORDS`` words), to a message that asks nothing: it opens in the first
    person or with a greeting ("We moved the party to Friday." - "I don't think so.")."""
    opening = words(message)[:1]
    telling = not is_question(message) and bool((FIRST_PERSON | _GREETING) & set(opening))
    unsure = _ABSTAINS.search(reply) or DOUBTS.search(reply)
    return telling and len(words(reply)) <= ABSTENTION_WORDS and bool(unsure)


def asks_to_recall(context: Context) -> bool:
    """Whether the new message asks to be told back something of the user's own (see
    ``ungrounded``)."""
    return asks_back(context.message.content) and asks_about_the_user(context.message.content)


# A question for the user's own name.
_ASKS_OWN_NAME = re.compile(r"\bmy name\b|\bam i called\b|\bwho am i\b", re.IGNORECASE)


def told_about(
    context: Context, similar: Collection[int] = (), unrelated: Collection[int] = ()
) -> list[Item]:
    """The messages of the context (recent and retrieved) that the new message asks about:
    those sharing a word with it, those whose seq is in ``similar``, and, to a question of
    the user's own, the user's that say they changed something of theirs ("I just moved
    to Valencia." to "Where do I live now?"; none of ``unrelated``, ``changed_own``), and
    to one for their name those that give it ("Hi! I'm Ines." to "What's my name?")."""
    asked = content_words(context.message.content)
    own = asks_about_the_user(context.message.content)
    own_name = bool(_ASKS_OWN_NAME.search(context.message.content))
    seen: set[int] = set()
    found = []
    for item in (*context.recent, *context.retrieved):
        if item.seq in seen or item.seq == context.message.seq:
            continue
        users = item.role == "user"
        changed = own and users and changed_own(item, asked, unrelated)
        gives_name = own_name and users and bool(introduced_names(item.content))
        held = content_words(item.content)
        shares = any(named(word, held) for word in asked)  # "cleaner" to "Who cleans?" too
        if item.seq in similar or shares or changed or gives_name:
            seen.add(item.seq)
            found.append(item)
    return found + changes_of(found, context, asked)


def _ungrounded(reply: str, context: Context, about: list[Item]) -> Borrowed | None:
    asked = _fact_words(context.message.content)
    told = set().union(*(_fact_words(item.content) for item in about)) - asked
    if not told or _fact_words(reply) & told or _ABSTAINS.search(reply):
        return None
    return Borrowed("ungrounded")


def _unsupported_subject(reply: str, context: Context, alike: Alike | None) -> Borrowed | None:
    """``never_said`` or ``elsewhere`` (see the module), for a question that asks to recall
    something of the user's own; None when the reply says it does not know, or when one of
    the user's messages that hold the reply's answer may be about what is asked: it names
    no thing of the user's own ("I parked the car on level 3." to "Where did I leave my
    vehicle?"), or the same thing (by word, as a compound's last part, or a word ``alike``
    finds the same: ``told.names_subject``). A thing the user has is named by "my" or by
    "I have a ..." (``told.possessed``)."""
    question = context.message.content
    subject = asked_subject(question)
    if _ABSTAINS.search(reply):
        return None
    if unknown := unknown_names(context, reply):
        return Borrowed("never_said", unknown)
    if not subject:
        return None
    asked = content_words(question)
    answered = content_words(reply) - asked
    holders = [
        item.content for item in user_items(context) if answered & content_words(item.content)
    ]
    others: set[str] = set()
    for held in holders:
        own = asked_subject(held) or possessed(held)
        same = names_subject(subject, question, own, held, alike)
        if not own or same or any(named(thing, asked) for thing in own):
            return None
        others.update(own)
    if not holders:
        return None
    found = tuple(sorted(others))
    if not named(subject[0], user_words(context)):
        return Borrowed("never_said", (subject[0], *found))
    return Borrowed("elsewhere", found)


def _not_their_name(reply: str, context: Context) -> Borrowed | None:
    """``elsewhere`` to a question for the user's own name: the reply names someone, and
    the names the user gave themselves in the prompt ("Hi! I'm Ines.") are others
    ("Your name is Anna." after "My wife is called Anna."); None when they gave none."""
    if not _ASKS_OWN_NAME.search(context.message.content) or _ABSTAINS.search(reply):
        return None
    given = set().union(*(introduced_names(item.content) for item in user_items(context)))
    answered = facts(reply)
    if not given or not answered or answered & given:
        return None
    return Borrowed("elsewhere", tuple(sorted(answered)))


def _outdated(reply: str, context: Context, unrelated: Collection[int]) -> Borrowed | None:
    """``outdated`` (see the module) for a question that asks to recall something, or None."""
    if _ABSTAINS.search(reply):
        return None
    own = asks_about_the_user(context.message.content)
    newer = outdated(reply, context, own=own, unrelated=unrelated)
    newer = newer or left_out(reply, context)
    return Borrowed("outdated", newer) if newer else None


def _fact_words(text: str) -> set[str]:
    """The content words and numbers of a text, number words in digits too ("twelve": "12",
    "twenty-one": "21")."""
    return content_words(text) | numbers(text)


def _unfounded(
    reply: str, context: Context, relevant: Collection[int] | None, unrelated: Collection[int]
) -> Borrowed | None:
    """``unfounded`` (see the module) for a question that asks to be told something back, or
    None: when it is not of the user's own and no message of theirs holds all its words
    (general knowledge: "What is the best soil for tomatoes?" after "I grow tomatoes."),
    when it asks for more talk ("What about the garden?"), or when the reply says it does
    not know or names a word of what the user (or, asked of "you", the assistant) said.
    Given ``relevant`` (the seqs of the user's messages closest to it in meaning), only
    the user's messages about what is asked count (:func:`told_about`): a filler's words
    are no answer ("I rent from the library.")."""
    question, telling = question_part(context.message.content)
    asked = _fact_words(question)
    grounds = user_items(context)
    if relevant is not None:
        about = told_about(context, relevant, unrelated)
        grounds = [item for item in about if item.role == "user"]
    told = [context.summary, telling, *(said_of(item.content, asked) for item in grounds)]
    if SECOND_PERSON & set(words(question)):
        shown = (*context.recent, *context.retrieved)
        told += [item.content for item in shown if item.role == "assistant"]
    support = set().union(*(_fact_words(text) for text in told))
    users = [_fact_words(item.content) for item in user_items(context)]
    holds_all = (all(named(word, held) for word in asked) for held in users if asked)
    about = asks_about_the_user(question) or any(holds_all)
    if not about or _FOLLOW_UP.match(question) or _ABSTAINS.search(reply):
        return None
    # The question's own words in other forms answer nothing ("I'm a cleaner." to "Who
    # cleans for us?").
    new = {word for word in _fact_words(reply) - asked if not named(word, asked)}
    return None if new & support else Borrowed("unfounded")


def _unsupported(
    reply: str, context: Context, shown: set[str], kinds: Collection[str] = ("number", "colour")
) -> Borrowed | None:
    """``unsupported`` (see the module): to a question about the user's own, a reply whose
    facts are all missing from the conversation, or any number of it; to one that asks
    back for a fact of one of ``kinds`` (a number, a colour; a time: a day, a month or
    digits, "the 15th") of what the user told, any such fact missing from it."""
    named_facts = facts(reply)
    made_up = {fact for fact in named_facts if fact.isdigit()} - shown
    question, told = context.message.content, [item.content for item in user_items(context)]
    if asks_about_the_user(question):
        if (named_facts and not named_facts & shown) or made_up:
            return Borrowed("unsupported", tuple(sorted(made_up or named_facts)))
    elif (kind := asks_kind_told(question, told)) in kinds:
        made_up = {fact for fact in named_facts if fact_kind(fact) in _FACTS_OF[kind]} - shown
        if kind == "time":
            made_up |= set(_DIGITS.findall(reply)) - set(_DIGITS.findall(" ".join(shown)))
        if made_up:
            return Borrowed("unsupported", tuple(sorted(made_up)))
    return None


def borrowed(
    reply: str,
    context: Context,
    system_prompt: str,
    similar: Collection[int] = (),
    relevant: Collection[int] | None = None,
    alike: Alike | None = None,
    unrelated: Collection[int] = (),
    far: Collection[int] = (),
) -> Borrowed | None:
    """Why ``reply`` borrows from the prompt rather than answering (see the module), or
    None when it does not. ``similar``: the seqs of the messages close in meaning to the
    new one (:func:`told_about`); ``relevant``: the user's messages most relevant to it,
    the only ones an ``unfounded`` reply's facts may come from (None: any of theirs);
    ``alike``: whether two words name the same thing (``conversations.alike``);
    ``unrelated``: the messages far from it in meaning (``outdated.changed_own``);
    ``far``: those about something else (``copying.copied_message``)."""
    shown = said(context)
    reply_words = set(words(reply))
    copied = sorted((reply_words & example_facts(system_prompt, context.head)) - shown)
    if copied:
        return Borrowed("example", tuple(copied))
    if repeats_previous(reply, context):
        return Borrowed("repeat")
    if source := copied_message(reply, context, far):
        shared = set(words(reply)) & set(words(source.content)) - COMMON
        return Borrowed("copied", tuple(sorted(shared)))
    told = [item.content for item in (context.message, *user_items(context))]
    profile_text, question = EXAMPLE_LINE.sub("", system_prompt), is_question(told[0])
    if persona := speaks_as_someone(reply, told, profile_text, question=question):
        return Borrowed("persona", persona)
    if abstains_unasked(reply, context.message.content):
        return Borrowed("abstained")
    if kind := without_kind(reply, context.message.content, told[1:]):
        return Borrowed(kind)
    if unsupported := _unsupported(reply, context, shown):
        return unsupported
    found = None
    if asks_to_recall(context):
        found = _unsupported_subject(reply, context, alike) or _not_their_name(reply, context)
        found = found or _outdated(reply, context, unrelated)
        found = found or _ungrounded(reply, context, told_about(context, similar, unrelated))
        found = found or _unfounded(reply, context, relevant, unrelated)
    elif asks_back(context.message.content):
        found = _outdated(reply, context, unrelated)
        found = found or _unfounded(reply, context, relevant, unrelated)
    found = found or _unsupported(reply, context, shown, kinds=("time",))
    shape = wrong_shape(reply, context.message.content, told[1:])
    return found or (Borrowed(shape) if shape else None)
