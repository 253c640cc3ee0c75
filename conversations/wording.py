"""The words of messages and replies, as the reply checks compare them
(``conversations.borrowing``, ``conversations.persona``): split into words, and the words
too common to be a fact of their own."""

import re


def word_set(text: str) -> frozenset[str]:
    """The words of a list written as one string."""
    return frozenset(text.split())


SENTENCE_END = re.compile(r"[.!?:;]+\s+|\n+")
WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
# Words too common to be a fact of their own: function words, the small talk of an
# acknowledgement, and the words of asking and telling.
COMMON = word_set(
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
COLOURS = word_set(
    "red orange yellow green blue purple violet pink brown black white grey gray teal "
    "turquoise cyan magenta beige navy maroon olive gold silver indigo lilac crimson "
    "burgundy terracotta scarlet emerald ochre mauve khaki charcoal lavender aqua cobalt "
    "fuchsia azure taupe"
)
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
DAYS = word_set(_WEEKDAYS) | word_set(_WEEKDAYS.replace("day", "days"))  # "on Tuesdays" too
MONTHS = word_set(
    "january february march april may june july august september october november december"
)
CLOSED = COLOURS | DAYS | MONTHS
QUESTION_START = word_set(
    "what which where who whom whose when how what's where's who's when's how's do does did "
    "is are was were can could tell remind name"
)
# "me" alone is not enough: "tell me something nice" asks about nothing of the user's.
FIRST_PERSON = word_set("i my mine myself i'm i've we our ours we're we've")
SECOND_PERSON = word_set("you your yours yourself you're you've")


def words(text: str) -> list[str]:
    """The words of a text, lower-cased, a curly apostrophe made straight."""
    return [word.replace("\u2019", "'").lower() for word in WORD.findall(text)]


def stem(word: str) -> str:
    """A word without a possessive, a plural or verb ending, or a final e, to compare
    forms ("leaves", "leave"; "coming", "come")."""
    word = word.removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def content_words(text: str) -> set[str]:
    """The stems of the words that can carry a fact: not common, numbers and the closed
    words (colours, days, months) included."""
    found = words(text)
    kept = {w for w in found if w not in COMMON and w not in QUESTION_START and len(w) > 2}
    return {stem(w) for w in kept | {w for w in found if w.isdigit() or w in CLOSED}}


def facts(reply: str) -> set[str]:
    """What a reply names as facts: names (capitalised words within a sentence that are not
    common; a sentence's first word may be any word), numbers, colours, days and months."""
    named = set()
    for sentence in SENTENCE_END.split(reply):
        found = WORD.findall(sentence)
        named |= {word.lower() for word in found[1:] if word[0].isupper()}
    named = {word.replace("\u2019", "'") for word in named} - COMMON
    return named | {w for w in words(reply) if w.isdigit() or w in CLOSED}


def fact_kind(fact: str) -> str:
    """A fact's kind (:func:`facts`): a number, a colour, a day, a month or a name."""
    if fact.isdigit():
        return "number"
    kinds = (("colour", COLOURS), ("day", DAYS), ("month", MONTHS))
    return next((kind for kind, known in kinds if fact in known), "name")


# Numbers in words, facts although common ("two"): a reply's "12" is the user's "twelve".
NUMBER_WORDS = dict(
    zip(
        words("one two three four five six seven eight nine ten eleven twelve thirteen fourteen")
        + words("fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty")
        + words("seventy eighty ninety"),
        map(str, [*range(1, 20), *range(20, 100, 10)]),
        strict=True,
    )
)
# A question that asks for a number ("What's my seat number?", "How old is she?"), and a
# reply's number in digits or words ("31B", "twelve", "fourth").
_ASKS_NUMBER = re.compile(
    r"\b(?:numbers?|pin|combination|how (?:many|old)|what age)\b", re.IGNORECASE
)
_NUMBER = re.compile(
    rf"\d|\b(?:{'|'.join(NUMBER_WORDS)}|"
    r"hundred|thousand|dozen|first|second|third|(?:four|fif|six|seven|eigh|nin|ten)th)\b",
    re.IGNORECASE,
)


# A number of tens and units in words, one number ("twenty-one": 21, not 20 and 1).
_COMPOUND = re.compile(
    r"\b(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)[-\s]+"
    r"(one|two|three|four|five|six|seven|eight|nine)\b",
    re.IGNORECASE,
)


def numbers(text: str) -> set[str]:
    """The numbers a text names in words, in digits ("two": "2"; "twenty-one" and "twenty
    one": "21" alone)."""
    found = {
        str(int(NUMBER_WORDS[tens.lower()]) + int(NUMBER_WORDS[units.lower()]))
        for tens, units in _COMPOUND.findall(text)
    }
    rest = words(_COMPOUND.sub(" ", text))
    return found | {NUMBER_WORDS[word] for word in rest if word in NUMBER_WORDS}


def asks_for_a_number(question: str) -> bool:
    """Whether a question asks for a number ("What's my seat number?", "How old is she?")."""
    return bool(_ASKS_NUMBER.search(question))


def names_a_number(text: str) -> bool:
    """Whether a text names a number, in digits or in words ("31B", "twelve", "fourth")."""
    return bool(_NUMBER.search(text))


# A question that asks when ("When is ...?", "What time ...?", "Which day ...?"), and a
# reply's time: a day, a month, a number, or a word of time ("tomorrow", "next week").
_ASKS_WHEN = re.compile(
    r"^\W*when\b|\b(?:what|which) (?:time|day|date|month|year)\b", re.IGNORECASE
)
_TIME = word_set(
    """
    today tonight tomorrow yesterday morning afternoon evening night noon midnight week
    weekend weekday weekdays month year spring summer autumn fall winter christmas easter
    soon later now next last ago o'clock am pm a.m p.m every daily weekly before after
    """
)


def asks_when(question: str) -> bool:
    """Whether a question asks when ("When is the plumber coming?", "What time is it?")."""
    return bool(_ASKS_WHEN.search(question))


def names_a_time(text: str) -> bool:
    """Whether a text names a time: a day, a month, a number or a word of time."""
    return names_a_number(text) or bool((DAYS | MONTHS | _TIME) & set(words(text)))
