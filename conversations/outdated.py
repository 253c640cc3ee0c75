"""Replies that give what the user said before they changed it (``conversations.borrowing``'s
``outdated``).

The reply's answer is in a message of the user's, and a later message of theirs is on the
same subject (it shares a word with the question, or, to a question of the user's own,
says they changed something of theirs: "I just moved to Valencia.") and names what the
reply does not:

* a fact of the same kind as the reply's (a name, a number, a colour, a day, a month):
  "It is 1234." after "The door code is 1234." and "They changed the door code to 9999.";
* or, when it tells a change in so many words ("from now on", "instead", "no longer",
  "I quit ... and started ..."), any word that can carry a fact beyond the question's and
  the older message's: "At Anna's house." after "My book club meets at Anna's house." and
  "The book club meets at the library from now on." (a place, a diet, a job are no
  names).

A change that names the old value again beside the new one ("I sold the Peugeot and
bought a Mazda."; on what is asked, "Dorota stopped working for us; our new cleaner is
Agnieszka."; or, after an earlier message that holds the old value and is on what is
asked, in so many words: "Actually the trip moved to Rhodes instead of Crete."), after an
earlier message that holds it, marks a reply with the old one; so does a later change of a
name that the old value's message holds ("Henrike relocated to Leipzig." after "My sister
Henrike lives in Bremen."), naming a fact of the reply's kind. So does a reply naming a
word of a retrieved message that retrieval left out of the prompt because a newer one
replaced it (``Context.replaced``, ``conversations.arrange``), when the newer one does not
name it: "The library." when only "The book club has moved to the tea room." was shown.

The retry after such a reply is shown the change without what it changed
(:func:`without_stale`): the lines before the first message that names a newer value that
hold the reply's answer leave the prompt, the user's and the assistant's ("Got it, Lyon."),
with the replies to them, retrieved or recent, so that the newest value is the only one
left to read.
"""

import re
from collections.abc import Collection
from dataclasses import replace

from conversations.context import Context, Item
from conversations.models import Role
from conversations.told import asked_subject, named, user_items
from conversations.wording import content_words, fact_kind, facts, stem, words

# A message of the user's telling they changed something of theirs ("I just moved to ...").
CHANGED = re.compile(
    r"\b(?:i|we)(?:['\u2019](?:ve|d)| have| had)?(?: \w+)? (?:moved|relocated|switched|"
    r"changed|swapped|sold|bought|replaced|traded|quit|left|started|joined|gone)\b",
    re.IGNORECASE,
)
# A message that tells a change in so many words, of anything ("... from now on").
_TELLS_CHANGE = re.compile(
    r"\b(?:from now on|instead|any ?more|no longer|relocated|retired|"
    r"these days|nowadays|moved|changed|switched|replaced|renamed|reset|swapped|postponed|"
    r"pushed back|brought forward)\b",
    re.IGNORECASE,
)


# A message that says a value replaces another it names ("Dorota stopped working for us;
# our cleaner is Agnieszka now."), beside those that tell a change in so many words; and
# the thing a message calls new ("our new cleaner").
_REPLACES = re.compile(r"\b(?:now|stopped)\b", re.IGNORECASE)
_NEW = re.compile(r"\bnew (\w+)", re.IGNORECASE)


def changed_own(item: Item, asked: set[str], unrelated: Collection[int] = ()) -> bool:
    """Whether a message of the user's tells they changed something of their own ("I just
    moved to Valencia."): it names no thing of theirs, or only what is ``asked``, and it is
    not one of ``unrelated``, the seqs of messages known to be far in meaning from the
    question (``closeness.unrelated_seqs``): "Dan and I moved everything about the team
    lunch." changed nothing a question about a boat's berth asks."""
    if item.seq in unrelated:
        return False
    things = asked_subject(item.content)
    return bool(CHANGED.search(item.content)) and all(named(t, asked) for t in things)


def tells_change(text: str) -> bool:
    """Whether ``text`` tells a change in so many words ("... instead", "I sold ...")."""
    return bool(_TELLS_CHANGE.search(text) or CHANGED.search(text))


def _newer_words(item: Item, older: set[str]) -> list[str]:
    """The words that can carry a fact of a message telling a change, beyond ``older``."""
    return sorted(content_words(item.content) - older) if tells_change(item.content) else []


def changes_of(found: list[Item], context: Context, asked: set[str]) -> list[Item]:
    """The user's messages beside ``found`` (those about a question) that tell a change
    of a fact one of ``found`` holds: "Actually the trip moved to Rhodes instead of Crete."
    after "We're planning a trip to Crete in July." is about "Where am I travelling in
    July?" too, though it shares no word with it."""
    held = set().union(*(facts(item.content) for item in found)) - asked
    if not held:
        return []
    first, seen = min(item.seq for item in found), {item.seq for item in found}
    return [
        item
        for item in user_items(context)
        if item.seq > first
        and item.seq not in seen
        and tells_change(item.content)
        and held & set(words(item.content))
    ]


def _names_old_again(last: Item, asked: set[str], own: bool) -> bool:
    """Whether the last message that holds the reply's answer may name it as the old value
    beside a new one: it says the user changed something of theirs (``own``), or it is on
    what is asked and says a value replaces another ("Dorota stopped working for us; our
    cleaner is Agnieszka." to "Who cleans for us now?"), or calls what is asked new ("Rosa
    left; our new teacher is Ilse." to "Who teaches us?"; not "Ann has a new friend, Bob."
    to "What is my sister's name?")."""
    if own and changed_own(last, asked):
        return True
    if any(named(word, content_words(new)) for new in _NEW.findall(last.content) for word in asked):
        return True
    on_it = any(named(word, content_words(last.content)) for word in asked)
    return on_it and bool(_REPLACES.search(last.content) or tells_change(last.content))


def _replaced(
    last: Item, holding: list[Item], asked: set[str], taken: set[str], kinds: set[str]
) -> tuple[str, ...]:
    """The facts of the reply's kind that ``last`` names beside the reply's when it tells a
    change and an earlier message holding the reply's answer is on the question: "Actually
    the trip moved to Rhodes instead of Crete." after "We're planning a trip to Crete in
    July." to "Where am I travelling in July?" (which shares no word with the change)."""
    earlier = [item for item in holding if item.seq != last.seq]
    if not tells_change(last.content) or not any(asked & content_words(i.content) for i in earlier):
        return ()
    old = {stem(fact) for fact in taken}  # "Tuesday." took "on Tuesdays"
    return tuple(
        sorted(f for f in facts(last.content) if stem(f) not in old and fact_kind(f) in kinds)
    )


def outdated(
    reply: str, context: Context, own: bool, unrelated: Collection[int] = ()
) -> tuple[str, ...]:
    """What the user said since that the reply (to a question that asks to recall
    something; ``own``: of the user's own) does not name (see the module), or ();
    ``unrelated``: as for :func:`changed_own`."""
    asked = content_words(context.message.content)
    answered = content_words(reply) - asked
    users = user_items(context)
    # By seq: a retry shows messages of the window again among the retrieved ones.
    holding = list({i.seq: i for i in users if answered & content_words(i.content)}.values())
    if not holding:
        return ()
    last = max(holding, key=lambda item: item.seq)
    # The reply's facts, and those of the messages it took them from ("Bilbao." opens with it).
    told = set().union(*(facts(item.content) for item in holding))
    taken = facts(reply) | (told & set(words(reply)))
    named_before, kinds = taken | facts(last.content), {fact_kind(f) for f in taken}
    if len(holding) > 1 and (newer := _replaced(last, holding, asked, taken, kinds)):
        return newer
    if len(holding) > 1 and _names_old_again(last, asked, own):
        # The change names the old value again ("I sold the Peugeot and bought a Mazda.").
        newer = sorted(f for f in facts(last.content) - taken if fact_kind(f) in kinds)
        earlier = set().union(*(content_words(i.content) for i in holding if i.seq != last.seq))
        newer = newer or _newer_words(last, earlier | asked | answered)
        if newer:
            return tuple(newer)
    older = asked | content_words(reply) | content_words(last.content)
    # A change of a name the old value's message holds is on it too ("Henrike relocated to
    # Leipzig." after "My sister Henrike lives in Bremen."), for a fact of the reply's kind.
    renamed = {item.seq for item in changes_of(holding, context, asked)}
    for item in users:
        on_it = asked & content_words(item.content) or (own and changed_own(item, asked, unrelated))
        if item.seq <= last.seq or not (on_it or item.seq in renamed):
            continue
        changed = sorted(f for f in facts(item.content) - named_before if fact_kind(f) in kinds)
        changed = changed or (_newer_words(item, older) if on_it else [])
        if changed:
            return tuple(changed)
    return ()


def left_out(reply: str, context: Context) -> tuple[str, ...]:
    """The words of the message that replaced a left-out one (``Context.replaced``) when
    the reply names a word of the left-out one that it does not, and none of its own ("The
    library." and not "It moved from the library to the tea room."; see the module), or
    ()."""
    asked, said = content_words(context.message.content), content_words(reply)
    shown = {item.seq: item for item in (*context.recent, *context.retrieved)}
    for old in context.replaced:
        newer = content_words(shown[old.replaced_by].content) if old.replaced_by in shown else set()
        before = content_words(old.content)
        if newer and (said - asked) & before - newer and not said & (newer - before - asked):
            return tuple(sorted(newer - asked - said))
    return ()


def _names_any(item: Item, newer: set[str]) -> bool:
    return bool(newer & (content_words(item.content) | set(words(item.content))))


def stale_seqs(reply: str, context: Context, newer: tuple[str, ...]) -> set[int]:
    """The seqs of the messages an ``outdated`` reply took its old value from (see the
    module): before the first message of the user's that names one of ``newer`` after the
    first that holds a word of the reply's answer (an earlier one may name a word of the
    change, "instead"), holding such a word and naming none of ``newer``; and the replies
    to those."""
    found, users = set(newer), user_items(context)
    answered = content_words(reply) - content_words(context.message.content)
    held = [item.seq for item in users if answered & content_words(item.content)]
    if not held:
        return set()
    changes = [item.seq for item in users if item.seq > min(held) and _names_any(item, found)]
    if not changes:
        return set()
    first, shown = min(changes), (*context.recent, *context.retrieved)
    stale = {
        item.seq
        for item in shown
        if item.seq < first
        and answered & content_words(item.content)
        and not _names_any(item, found)
    }
    # The reply to an old value goes with it: it speaks of the past ("Got it.").
    replies = {item.seq for item in shown if item.role == Role.ASSISTANT and item.seq - 1 in stale}
    return stale | {seq for seq in replies if seq < first}


def without_stale(context: Context, stale: set[int]) -> Context:
    """``context`` without the messages of ``stale`` (:func:`stale_seqs`), retrieved or
    recent; itself when it shows none of them."""
    recent = [item for item in context.recent if item.seq not in stale]
    retrieved = [item for item in context.retrieved if item.seq not in stale]
    if len(recent) == len(context.recent) and len(retrieved) == len(context.retrieved):
        return context
    freed = sum(item.cost() for item in context.recent if item.seq in stale)
    freed += sum(item.cost(numbered=True) for item in context.retrieved if item.seq in stale)
    return replace(context, recent=recent, retrieved=retrieved, used=context.used - freed)
