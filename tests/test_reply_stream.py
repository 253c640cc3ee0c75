"""The reply cleaning on a stream: what it gives out as the text arrives is, put together,
exactly the reply cleaned once complete (pure functions; property-based)."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.replies import clean_reply
from agents.reply_stream import ReplyStream
from conversations.perspective import said_back

# Pieces of what small models write, good and bad.
PIECES = [
    "Hello",
    " there",
    ", my name is Adam",
    ".",
    " ",
    "\n",
    "\n\n",
    "User: hi",
    "Assistant:",
    " Marta: yes",
    "Marta Silva: no",
    "- camera: Takes a photo.",
    " Arguments: {}",
    '{"tool": "search_history", "arguments": {"query": "x. y"}}',
    " - milk: two litres",
    "- eggs",
    "(12 earlier messages are not shown here.)",
    "Recent messages:",
    '"',
    "“",
    "”",
    "'",
    "Rome",
    "!",
    "? ",
    "Step one: mix it",
    "\r\n",
    "  ",
    "e.g. this",
    "The assistant can use tools",
    "It is a symbol of the sea.",
    " It is a symbol",
    " of the sea",
    " of the sky and the sea.",
    "It is a source of life",
    ", a source of joy",
    ", a source",
    " of joy.",
    "; a source of hope",
]


def streamed(raw: str, cuts: list[int], *, transcript: bool, rewrite=None) -> tuple[str, str]:
    stream = ReplyStream(transcript=transcript, rewrite=rewrite)
    shown, start = [], 0
    for cut in [*sorted({c % (len(raw) + 1) for c in cuts}), len(raw)]:
        shown.append(stream.feed(raw[start:cut]))
        start = cut
    rest, final = stream.finish()
    return "".join(shown) + rest, final.text


@settings(max_examples=600, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(PIECES), max_size=14),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    transcript=st.booleans(),
)
# A clause said again, its last word glued to a frame marker still being written (found
# by a CI run): the comma that opens the second clause was shown, then cut with it.
@example(
    pieces=[", a source of joy", ", a source of joy", "The assistant can use tools"],
    cuts=[52],
    transcript=False,
)
def test_what_a_stream_shows_is_the_reply_cleaned_once_complete(pieces, cuts, transcript):
    raw = "".join(pieces)
    shown, final = streamed(raw, cuts, transcript=transcript)
    assert shown == final == clean_reply(raw, transcript=transcript).text


# The user's voice, said back as the assistant's (conversations.perspective).
TOLD = ["I work in Leeds and love mango.", "My dog is Rex. I'm a nurse."]
VOICE_PIECES = [*PIECES, "I work in Leeds", " I love mango", "My dog", " is Rex", "I'm a nurse"]


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(VOICE_PIECES), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
    transcript=st.booleans(),
)
def test_a_rewritten_stream_shows_the_reply_cleaned_then_rewritten(pieces, cuts, transcript):
    raw = "".join(pieces)

    def rewrite(text: str) -> str:
        return said_back(text, TOLD)

    shown, final = streamed(raw, cuts, transcript=transcript, rewrite=rewrite)
    assert shown == final == rewrite(clean_reply(raw, transcript=transcript).text)


def test_a_rewritten_stream_holds_a_sentence_until_it_is_complete():
    stream = ReplyStream(rewrite=lambda text: said_back(text, TOLD))
    assert stream.feed("I work in Leeds. My dog") == "You work in Leeds."
    assert stream.finish()[0] == " Your dog"


@pytest.mark.parametrize(
    ("raw", "early"),
    [
        ("Paris is the capital of France. It has", "Paris is the capital of France."),
        ("Hello, my name is Adam - camera: Takes", ""),
        ("Sure.\nUser: And", "Sure."),
        ('"Rome', ""),
        ("Fine, thanks. Arguments", "Fine, thanks."),
    ],
)
def test_a_stream_shows_what_no_later_text_can_change(raw, early):
    stream = ReplyStream()
    assert stream.feed(raw) == early


def test_a_line_that_reads_as_a_speakers_turn_is_held_until_it_ends():
    # "Hello. Marta:" is a label of two capitalised words: the cleaning drops the line.
    stream = ReplyStream(transcript=True)
    assert stream.feed("Hello\nHello. Marta: yes") == "Hello"
    assert stream.finish() == ("", clean_reply("Hello\nHello. Marta: yes", transcript=True))


def test_a_long_sentence_streams_before_the_reply_ends():
    stream = ReplyStream()
    shown = [stream.feed(word + " ") for word in ["One.", "Two.", "Three.", "Four"]]
    assert "".join(shown) == "One. Two. Three."
    assert stream.finish()[0] == " Four"


def test_a_looping_reply_streams_its_first_saying_and_no_repeat():
    sentence = " It is a symbol of the power of the sea."
    raw = "The lighthouse stands tall." + sentence * 4
    stream = ReplyStream()
    shown = "".join(stream.feed(word + " ") for word in raw.split(" ") if word)
    rest, final = stream.finish()
    assert final.text == "The lighthouse stands tall. It is a symbol of the power of the sea."
    assert final.removed == ["repeated"]
    assert (shown + rest).strip() == final.text


def test_a_reply_looping_on_a_clause_streams_up_to_the_first_repeat():
    raw = "Rain is a gift. It is a source of life, a source of joy, a source of hope"
    raw += ", a source of joy, a source of hope, a source"
    stream = ReplyStream()
    shown = "".join(stream.feed(word + " ") for word in raw.split(" "))
    rest, final = stream.finish()
    assert final.text == "Rain is a gift. It is a source of life, a source of joy, a source of hope"
    assert final.removed == ["repeated"]
    assert (shown + rest).strip() == final.text
