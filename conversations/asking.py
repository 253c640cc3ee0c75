"""What a message asks, as the reply checks read it (``conversations.borrowing``): whether it
is a question, whether it asks something of the user's own, or to be told something back."""

import re

from conversations.wording import FIRST_PERSON, QUESTION_START, word_set, words

# A question that asks to be told something back, among its first words ("In which city
# ...?"); one that asks for advice or a suggestion has no answer in the conversation.
_RECALL = word_set("what which where who whom whose when how what's where's who's when's remind")
_ADVICE = word_set("should could would might recommend suggest suggestion idea ideas")
_RECALL_WORDS = 3


def is_question(message: str) -> bool:
    """Whether a message asks something: it ends in "?" or opens with a question's word."""
    first = words(message)[:1]
    return message.rstrip().endswith("?") or bool(QUESTION_START.intersection(first))


def asks_about_the_user(message: str) -> bool:
    """Whether the message asks about something of the user's own ("What is my ...?")."""
    return is_question(message) and bool(FIRST_PERSON & set(words(message)))


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
