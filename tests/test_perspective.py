"""A reply that tells the user's own facts in the user's voice is said again as the
assistant (``conversations.perspective``); against the loopback runtime too."""

import pytest

from conversations.perspective import said_back
from tests.test_borrowing import notes, styled
from tests.test_prompt_styles import chat, reply  # noqa: F401

TOLD = ["Hi, I'm Ines. I work as a nurse in Leeds.", "My favourite fruit is mango."]


@pytest.mark.parametrize(
    ("reply_text", "said"),
    [
        ("I work as a nurse in Leeds.", "You work as a nurse in Leeds."),
        ("I'm a nurse in Leeds.", "You are a nurse in Leeds."),
        ("My favourite fruit is mango!", "Your favourite fruit is mango!"),
        ("I love mango, it is my favourite.", "You love mango, it is your favourite."),
        ("I was a nurse in Leeds.", "You were a nurse in Leeds."),
        # Two sentences: only the one in the user's voice changes.
        ("Mango. I love mango.", "Mango. You love mango."),
    ],
)
def test_a_sentence_in_the_users_voice_is_said_as_the_assistant(reply_text, said):
    assert said_back(reply_text, TOLD) == said


@pytest.mark.parametrize(
    "reply_text",
    [
        "I don't know.",  # the assistant's own state
        "I'm not sure where you work.",
        "You work as a nurse in Leeds.",  # already spoken to the user
        "I think you work in Leeds.",
        "I like pears.",  # nothing the user said: not theirs to give back
        "The capital is Paris.",  # no first person
    ],
)
def test_other_sentences_stay_as_they_are(reply_text):
    assert said_back(reply_text, TOLD) == reply_text


@pytest.mark.django_db
@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_in_the_users_voice_is_stored_as_the_assistants(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("I work as a nurse in Leeds.", profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: "I work as a nurse in Leeds."
    job = chat("Where do I work?", profile=profile)
    assert reply(job) == "You work as a nurse in Leeds."
    [call] = job.steps.filter(kind="model_call", name="reply")
    assert call.output["text"] == "I work as a nurse in Leeds."  # the model's own, kept
    assert "discarded" not in call.output
    assert notes(job, "reply_borrowed") == notes(job, "reply_replaced") == []


@pytest.mark.django_db
def test_a_statement_is_answered_in_any_voice(chat, runtime):  # noqa: F811
    runtime.script = lambda prompt, body: "I work in Leeds too."
    job = chat("I work as a nurse in Leeds.", profile=styled("transcript"))
    assert notes(job, "reply_replaced") == []
