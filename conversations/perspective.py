"""A reply that tells the user their own facts in the user's voice, said back as the
assistant.

Asked "Where do I work?", a base model continuing a transcript often answers in the voice of
the user's earlier turn: "I work as a nurse in Leeds." The fact is right; the speaker is not.
:func:`said_back` turns such a reply's first-person sentences into the second person ("You
work as a nurse in Leeds."). Only a sentence that speaks in the first person, shares a word
that can carry a fact with what the user said, does not speak to the user already and does
not say that it does not know is turned; any other sentence stays as it is. English needs no
other change of the verb than "am" and "was" after "I". The reply's tokens carry the reply
said back as it streams: the agent gives :func:`said_back` to its model call
(``agents.actions.ModelCall.rewrite``).
"""

import re

from agents.replies import sentences
from conversations.wording import FIRST_PERSON, SECOND_PERSON, content_words, words

# "I don't know", "I'm not sure", "I can't remember": the assistant speaking of itself.
_OWN_STATE = re.compile(
    r"\b(?:know|sure|remember|recall|afraid|sorry|think|believe|guess|help|can't|cannot)\b",
    re.IGNORECASE,
)
_APOSTROPHE = "['\u2019]"
# The first person and what it becomes, longest first ("I am" before "I").
_SWAPS = [
    (rf"\bI(?:{_APOSTROPHE}m| am)\b", "you are"),
    (r"\bI was\b", "you were"),
    (rf"\bI{_APOSTROPHE}ve\b", "you have"),
    (rf"\bI{_APOSTROPHE}d\b", "you would"),
    (rf"\bI{_APOSTROPHE}ll\b", "you will"),
    (r"\bI\b", "you"),
    (r"\bmyself\b", "yourself"),
    (r"\bmine\b", "yours"),
    (r"\bmy\b", "your"),
    (r"\bme\b", "you"),
]


def said_back(reply: str, told: list[str]) -> str:
    """``reply`` with each sentence that tells one of ``told`` (the user's messages) in the
    user's voice said in the second person; ``reply`` itself when there is none. Sentence by
    sentence (``agents.replies.sentences``), each on its own: the reply's complete sentences
    come out the same whatever follows them, as a streamed reply needs
    (``agents.reply_stream``)."""
    told_words = set().union(*(content_words(text) for text in told)) if told else set()
    return "".join(_sentence(reply[start:end], told_words) for start, end in sentences(reply))


def _sentence(sentence: str, told_words: set[str]) -> str:
    found = set(words(sentence))
    if (
        not found & FIRST_PERSON
        or found & SECOND_PERSON
        or _OWN_STATE.search(sentence)
        or not content_words(sentence) & told_words
    ):
        return sentence
    for pattern, replacement in _SWAPS:
        sentence = re.sub(pattern, replacement, sentence, flags=re.IGNORECASE)
    return _capitalised(sentence)


def _capitalised(sentence: str) -> str:
    stripped = sentence.lstrip()
    if not stripped:
        return sentence
    start = len(sentence) - len(stripped)
    return sentence[:start] + stripped[0].upper() + stripped[1:]
