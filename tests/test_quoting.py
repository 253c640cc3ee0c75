"""The user's own sentence, quoted beside "I don't know." where the model could not answer
from it (``conversations.quoting``): which sentence, and when none."""

from dataclasses import replace

from conversations.context import Context, Item
from conversations.quoting import quoted, told_sentence


def context(message: str, *history: str, retrieved: tuple[str, ...] = ()) -> Context:
    """``history`` (user and assistant in turn) before ``message``; ``retrieved``: older
    user messages brought back by a search, before the history's seqs."""
    base = len(retrieved)
    found = [
        Item(seq=n + 1, role="user", content=text, tokens=1) for n, text in enumerate(retrieved)
    ]
    recent = [
        Item(seq=base + n + 1, role="user" if n % 2 == 0 else "assistant", content=text, tokens=1)
        for n, text in enumerate(history)
    ]
    own = Item(seq=base + len(history) + 1, role="user", content=message, tokens=1)
    return Context(budget=100, used=10, fits=True, recent=recent, message=own, retrieved=found)


def test_a_short_message_is_quoted_whole_a_long_ones_sentence_that_shares_a_word():
    morning = (
        "I went to the market this morning and bought apples, pears, bread, cheese and a "
        "bunch of flowers for the kitchen table. My canoe is moored at Lochinver."
    )
    asked = context("Where do I keep my canoe?", morning, "Nice.", "The weather was lovely.")
    assert told_sentence(asked, similar=(), relevant=None) == "My canoe is moored at Lochinver."
    short = "I went out early. My canoe is moored at Lochinver."
    asked = context("Where do I keep my canoe?", short, "Nice.")
    assert told_sentence(asked, similar=(), relevant=None) == short


def test_a_short_message_closest_in_meaning_is_quoted_without_a_shared_word():
    asked = context("Which hue do I like best?", "My favourite colour is teal.", "Noted.")
    assert told_sentence(asked, similar={1}, relevant={1}) == "My favourite colour is teal."
    # Not among the closest in meaning, and no word shared: nothing.
    assert told_sentence(asked, similar=(), relevant=None) is None


def test_what_the_question_names_as_the_users_own_must_be_named_or_close_in_meaning():
    kitten = "I just adopted a kitten called Miso."
    asked = context("What is my dog called?", kitten, "Nice.")
    assert told_sentence(asked, similar=(), relevant=None) is None  # "called" is not enough
    # Unless it is among the closest in meaning: "I don't know." says the rest.
    assert told_sentence(asked, similar={1}, relevant={1}) == kitten
    asked = context("What is my grandson called?", "My youngest grandson is Alistair.", "Nice.")
    assert told_sentence(asked, similar=(), relevant=None) == "My youngest grandson is Alistair."


def test_a_question_about_the_assistant_quotes_nothing():
    asked = context("What is your name?", "Hi there! I'm Nadia, I work as a nurse.", "Hello.")
    assert told_sentence(asked, similar={1}, relevant={1}) is None


def test_the_newest_sentence_wins_and_a_changed_one_is_never_quoted():
    asked = context(
        "Which gym locker is mine?",
        "My locker at the gym is 112.",
        "Noted.",
        "I swapped lockers at the gym, mine is 205 now.",
        "Noted.",
    )
    newest = "I swapped lockers at the gym, mine is 205 now."
    assert told_sentence(asked, similar=(), relevant=None) == newest
    assert told_sentence(asked, similar=(), relevant=None, stale={3}) == (
        "My locker at the gym is 112."
    )
    assert told_sentence(asked, similar=(), relevant=None, stale={1, 3}) is None


def test_only_the_messages_about_as_close_in_meaning_as_the_closest_are_quoted():
    asked = context(
        "Where does my sister work?", "My sister works at a bakery.", "Nice.", "My work is dull."
    )
    assert told_sentence(asked, similar=(), relevant={1}) == "My sister works at a bakery."
    # Closest, but not about the sister the question names.
    assert told_sentence(asked, similar=(), relevant={3}) is None
    assert told_sentence(asked, similar=(), relevant=set()) is None


def test_retrieved_messages_are_quoted_too():
    asked = context(
        "What's the tortoise's name?", "Nice day.", retrieved=("Our tortoise is Humphrey.",)
    )
    assert told_sentence(asked, similar=(), relevant=None) == "Our tortoise is Humphrey."


def test_nothing_is_quoted_but_to_a_question_that_asks_to_be_told_something_back():
    history = ("My favourite café is Luna.", "Nice.")
    assert told_sentence(context("I love my favourite café.", *history), (), None) is None
    assert told_sentence(context("Should I go to my favourite café?", *history), (), None) is None
    assert told_sentence(context("Which café is my favourite?", *history), (), None) == (
        "My favourite café is Luna."
    )


def test_questions_the_assistants_words_and_long_stories_are_never_quoted():
    story = "My garden " + "has many flowers and " * 10 + "a pond."
    asked = context(
        "What is in my garden?",
        "What should I plant in my garden?",
        "Roses grow well in a garden.",
        story,
        "Lovely.",
    )
    assert told_sentence(asked, similar=(), relevant=None) is None


def test_the_quote_says_it_does_not_know_in_the_profiles_words_then_what_the_user_said():
    assert quoted("Sorry, I cannot say.", "My dog is Rex.") == (
        "Sorry, I cannot say. You told me: “My dog is Rex.”"
    )


def test_the_retrieved_message_marked_most_recent_is_quoted_whatever_its_words():
    asked = context(
        "Who looks after my teeth?",
        "Nice day.",
        retrieved=(
            "My dentist is Dr. Farrow.",
            "Dr. Farrow retired, so Ms. Quayle sees to my fillings now.",
        ),
    )
    older, newer = asked.retrieved
    asked.retrieved = [older, replace(newer, mark="most recent")]
    # The older is the closer in meaning; the newer names nothing the question names.
    assert told_sentence(asked, similar={1}, relevant={1}) == newer.content
    # Unmarked, the newer is no candidate: the older is quoted.
    asked.retrieved = [older, newer]
    assert told_sentence(asked, similar={1}, relevant={1}) == older.content
    # Never a stale one, marked or not.
    asked.retrieved = [older, replace(newer, mark="most recent")]
    assert told_sentence(asked, similar={1}, relevant={1}, stale={2}) == older.content


def test_only_the_message_marked_most_recent_is_quoted_when_asked_for_it_alone():
    asked = context(
        "Who looks after my teeth?",
        "My dentist is Dr. Farrow.",
        "Ok.",
        retrieved=("Dr. Farrow retired, so Ms. Quayle sees to my fillings now.",),
    )
    [newer] = asked.retrieved
    # The closest in meaning is quoted; asked for the marked one alone, nothing is.
    assert told_sentence(asked, similar={2}, relevant={2}) == "My dentist is Dr. Farrow."
    assert told_sentence(asked, similar={2}, relevant={2}, marked_only=True) is None
    asked.retrieved = [replace(newer, mark="most recent")]
    assert told_sentence(asked, similar={2}, relevant={2}, marked_only=True) == newer.content


def test_a_later_message_far_in_meaning_is_no_update_of_the_closest():
    asked = context(
        "Where does Ludmila work?",
        "Ludmila took a desk job at the printing works.",
        "Ok.",
        "Here is the log: 10:12:46 INFO worker finn handled request in 886 ms",
        "Thanks.",
    )
    # Said after the closest in meaning, it may be its update, unless known to be far.
    assert told_sentence(asked, similar={1}, relevant={1}).startswith("Here is the log")
    assert told_sentence(asked, similar={1}, relevant={1}, unrelated={3}) == (
        "Ludmila took a desk job at the printing works."
    )


def test_to_a_question_for_a_colour_a_time_or_a_number_only_a_sentence_naming_one_is_quoted():
    busy = "Thanks! Dan and I fixed the garden fence. The garden was busy, but it worked out."
    painted = "We painted the garden shed sage green."
    shed = "What colour is our garden shed?"
    assert told_sentence(context(shed, busy, "Nice."), similar={1}, relevant={1}) is None
    asked = context(shed, painted, "Nice.", busy, "Nice.")
    assert told_sentence(asked, similar={1, 3}, relevant={1, 3}) == painted
    roofer = "When is the roofer coming?"
    friend = context(roofer, "The roofer is a friend of Dan's.", "Nice.")
    assert told_sentence(friend, similar={1}, relevant={1}) is None
    booked = context(roofer, "The roofer is booked for Thursday.", "Nice.")
    assert told_sentence(booked, similar={1}, relevant={1}) == "The roofer is booked for Thursday."
    hens = context("How many hens live in our coop?", "Our hens are called Dot and Peg.", "Ok.")
    assert told_sentence(hens, similar={1}, relevant={1}) is None
    # A number question whose answer, as the user told it, is no number.
    hint = context("What is my PIN hint?", "My PIN hint is pumpkin.", "Noted.")
    assert told_sentence(hint, similar={1}, relevant={1}) == "My PIN hint is pumpkin."
