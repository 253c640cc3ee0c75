"""A reply that says again most of the words of a message about something else, to a
question that message has nothing to do with, is asked again and then replaced by "I don't
know" (``conversations.copying``); against the loopback runtime, with the embedder's real
closeness in meaning."""

import pytest

from conversations.borrowing import borrowed
from conversations.copying import copied_message
from tests.test_borrowing import context, notes, styled, temperatures
from tests.test_prompt_styles import chat, reply  # noqa: F401

pytestmark = pytest.mark.django_db

FILLER = (
    "Could you remind Dan about the team lunch? I think it was moved yesterday near the "
    "kitchen, together with the rusty kettle."
)
HISTORY = ("The plumber came on Monday.", "Ok.", FILLER, "Sure.")
# The filler's template with other words in its slots, as Gemma 3 270M wrote it.
COPY = "I think it was moved on Monday near the kitchen, together with the broken teapot."


def test_a_long_reply_made_of_a_far_messages_words_copies_it():
    asked = context("When is the electrician coming?", *HISTORY)
    found = borrowed(COPY, asked, "", far={3})
    assert (found.problem, found.words) == (
        "copied",
        ("kitchen", "moved", "near", "think", "together"),
    )
    assert "copies a message about something else" in found.describe()


def test_a_message_not_known_to_be_far_from_the_question_is_not_copied():
    asked = context("When is the electrician coming?", *HISTORY)
    assert copied_message(COPY, asked, far={1, 2, 4}) is None  # no vectors: not known
    assert copied_message(COPY, asked, far={3}).seq == 3


def test_a_message_that_names_what_is_asked_is_not_copied_however_far():
    asked = context("What did Dan say about the lunch?", *HISTORY)
    assert copied_message(COPY, asked, far={3}) is None


@pytest.mark.parametrize(
    "answer",
    [
        "It was moved near the kitchen, I think.",  # short: an answer's few words by right
        "I don't know, I think it was moved near the kitchen with the kettle.",  # abstains
        "The electrician is coming on Thursday afternoon to look at the wiring.",  # own words
    ],
)
def test_short_abstaining_or_own_worded_replies_copy_nothing(answer):
    asked = context("When is the electrician coming?", *HISTORY)
    assert copied_message(answer, asked, far={1, 3}) is None


def test_a_reply_to_a_statement_is_not_judged_a_copy():
    told = context("I had a long day at work.", *HISTORY)
    assert copied_message(COPY, told, far={1, 3}) is None
    assert borrowed(COPY, told, "", far={1, 3}).problem == "persona"  # its own check


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_the_agent_asks_again_then_says_it_does_not_know(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Ok."
    chat("The plumber came on Monday.", profile=profile)
    chat(FILLER, profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: COPY
    job = chat("How many sheep does my cousin Evander keep?", profile=profile)
    assert reply(job).startswith("I don't know.")
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["copied"] * 3
    assert temperatures(runtime) == [0, 0.7, 0.7]  # asked again with sampling


def test_the_agent_keeps_a_short_right_answer_from_a_message_far_from_the_question(chat, runtime):  # noqa: F811
    runtime.script = lambda prompt, body: "Ok."
    chat("The plumber came round on Monday to fix the leaking kitchen tap.")
    chat(FILLER)
    runtime.reset()
    runtime.script = lambda prompt, body: "The plumber came round on Monday, to the kitchen."
    job = chat("When was the tradesman here?")  # 0.05 like the plumber's message
    assert reply(job) == "The plumber came round on Monday, to the kitchen."
    assert notes(job, "reply_borrowed") == []
