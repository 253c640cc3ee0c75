"""Replies that borrow from the prompt's scaffolding (its example's facts, the previous reply,
a value the user never gave) are asked again with sampling, then replaced by the profile's
"I don't know", whatever the prompt style; against the loopback runtime."""

import json
from dataclasses import replace

import pytest

from agents.models import AgentProfile, Step
from conversations.borrowing import (
    Borrowed,
    asked_subject,
    asks_about_the_user,
    asks_to_recall,
    borrowed,
    example_facts,
    told_about,
)
from conversations.context import Context, Item
from conversations.outdated import stale_seqs
from conversations.wording import numbers
from tests.test_prompt_styles import chat, chat_profile, reply  # noqa: F401

pytestmark = pytest.mark.django_db

EXAMPLE = (
    "You are a helpful assistant.\n\nExample:\n"
    "User: My friend is called Tom.\nAssistant: Nice to hear about Tom.\n"
    "User: I keep my bike in the shed.\nAssistant: Good to know."
)


def sampled(body: dict) -> bool:
    """Whether a generate call asks for sampling (a retry), in either protocol."""
    options = body.get("options") or {}
    return options.get("temperature", body.get("temperature")) == 0.7


def scripted(greedy: str, retry: str):
    return lambda prompt, body: retry if sampled(body) else greedy


def focused(body: dict) -> bool:
    """Whether a generate call shows messages again under the earlier history's header."""
    shown = json.dumps(body)
    return "Earlier in the conversation:" in shown or "Messages found in the earlier" in shown


def in_turn(*answers: str):
    """A script that answers ``answers`` one after the other, whatever is asked."""
    given = iter(answers)
    return lambda prompt, body: next(given)


def asked_again(runtime, style: str, *, changed: bool = False) -> None:
    """A first answer was asked again: a base model (a transcript prompt) was shown what is
    asked about on its first call already, and asked again sampling, unless the retry's
    prompt ``changed`` (an old value left out); an instruction-tuned one is shown it on the
    retry, greedily."""
    first, second = (request.body for request in runtime.generate_requests()[:2])
    assert (focused(first), focused(second)) == (style == "transcript", True)
    sampled = style == "transcript" and not changed
    assert temperatures(runtime)[:2] == ([0, 0.7] if sampled else [0, 0])


def notes(job, name: str) -> list[dict]:
    return [s.input for s in Step.objects.filter(job=job, kind="note", name=name).order_by("index")]


def temperatures(runtime) -> list[float]:
    found = []
    for request in runtime.generate_requests():
        options = request.body.get("options") or {}
        found.append(options.get("temperature", request.body.get("temperature")))
    return found


def seed(request) -> int | None:
    return (request.body.get("options") or {}).get("seed", request.body.get("seed"))


def styled(style: str) -> str:
    """The profile of a style whose system prompt carries an example conversation."""
    if style == "transcript":
        return "default"
    chat_profile(system_prompt=EXAMPLE, options={"temperature": 0})
    return "instruct"


# --- The detector, on a context ------------------------------------------------------------


def context(message: str, *history: str) -> Context:
    """A context with ``history`` (user and assistant in turn) before ``message``."""
    recent = [
        Item(seq=n + 1, role="user" if n % 2 == 0 else "assistant", content=text, tokens=1)
        for n, text in enumerate(history)
    ]
    own = Item(seq=len(history) + 1, role="user", content=message, tokens=1)
    return Context(budget=100, used=10, fits=True, recent=recent, message=own)


def test_the_default_profiles_example_facts_are_the_uncommon_words_of_its_example():
    default = AgentProfile.objects.get(name="default")
    assert example_facts(default.system_prompt) == {
        "friend",
        "tom",
        "bike",
        "shed",
        "sunny",
        "walk",
    }
    assert example_facts("You are a helpful assistant.") == frozenset()


def test_a_reply_that_names_a_listed_tool_the_user_never_named_copies_the_tool_list():
    """Seen with Qwen2.5-Coder 1.5B in the chat style: "We have a tortoise named Biscuit."
    answered with the tool list's own words."""
    from agents.tools import enabled_tools
    from conversations.frame import tools_block

    profile = AgentProfile(tools=["search_history", "read_history", "calculator"])
    block = tools_block(profile)
    assert example_facts("", [block]) == {"search_history", "read_history", "calculator"}
    assert example_facts("Tools:\n- calculator: none here") == frozenset()  # not a tool list
    told = context("We have a tortoise named Biscuit.", "Hi!", "Hello!")
    told.head = ["You are a helpful assistant.", block]
    copied = "The assistant can use the calculator to evaluate arithmetic expressions exactly."
    found = borrowed(copied, told, told.head[0])
    assert found == Borrowed("example", ("calculator",))
    assert "tool list (calculator)" in found.describe()
    asked = context("Is there a calculator in your tools?", "Hi!", "Hello!")
    asked.head = told.head
    assert borrowed("Yes, I have a calculator.", asked, told.head[0]) is None
    assert enabled_tools(profile.tools)  # the names above are the real tools'


def test_a_reply_with_the_examples_facts_borrows_unless_the_user_said_them():
    asked = context("Where is my dog?", "I have a dog.", "Good to know.")
    found = borrowed("I'm sorry, but you don't have a dog in the shed.", asked, EXAMPLE)
    assert (found.problem, found.words) == ("example", ("shed",))
    told = context("Where is my bike?", "I keep my bike in the shed.", "Good to know.")
    assert borrowed("You keep your bike in the shed.", told, EXAMPLE) is None


def test_the_previous_reply_again_borrows_unless_the_user_asked_the_same_again():
    again = context("I also have a dog.", "I have a cat.", "Good to know.")
    assert borrowed("Good to know!", again, EXAMPLE).problem == "repeat"
    same = context("What is my cat called?", "My cat is Tom.", "Your cat is Tom.")
    same.recent.append(Item(seq=3, role="user", content="What is my cat called?", tokens=1))
    same.recent.append(Item(seq=4, role="assistant", content="Your cat is Tom.", tokens=1))
    assert borrowed("Your cat is Tom.", same, "") is None


def test_saying_again_that_it_does_not_know_to_a_question_is_no_borrowed_repeat():
    history = ("My uncle drives a taxi.", "Noted.", "What is my aunt's job?", "I don't know.")
    again = context("Which gym do I climb at?", *history)
    assert borrowed("I don't know.", again, EXAMPLE) is None
    assert borrowed("I don't know!", again, EXAMPLE) is None
    # To a message that asks nothing, it is no answer: the previous reply again.
    told = context("We walked by the river all day.", *history)
    assert borrowed("I don't know.", told, EXAMPLE).problem == "repeat"


def test_a_reply_that_names_itself_speaks_as_someone_unless_the_profile_names_it():
    hello = context("Hi there! I'm Nadia, I work as a nurse.")
    found = borrowed("Hi there! I'm Sarah.", hello, EXAMPLE)
    assert (found.problem, found.words) == ("persona", ("Sarah",))
    assert borrowed("I'm Nadia.", hello, EXAMPLE).words == ("Nadia",)  # the user's name
    assert borrowed("My name is Alex, nice to meet you.", hello, "").words == ("Alex",)
    named = "You are Pip, a helpful assistant.\n\nExample:\nUser: Hi, I'm Ann."
    assert borrowed("Hello Nadia, I'm Pip.", hello, named) is None
    # A name the example conversation shows is no name of the assistant's.
    assert borrowed("I'm Ann.", context("Hi!"), named).problem == "example"


def test_a_reply_that_says_it_has_a_role_speaks_as_someone():
    chef = context("I'm a chef in a hotel kitchen.")
    assert borrowed("I'm a waitress.", chef, EXAMPLE).words == ("waitress",)
    assert borrowed("Oh, I work as a web designer.", chef, "").words == ("designer",)
    assert borrowed("I am an engineer at a bank.", chef, "").words == ("engineer",)
    # The system prompt gives the assistant its role; these say nothing of a role.
    assert borrowed("I'm a helpful assistant.", chef, "You are a helpful assistant.") is None
    for fine in ("I'm a bit jealous, that sounds fun.", "I'm a big fan of lamb."):
        assert borrowed(fine, chef, "") is None


def test_a_reply_that_opens_as_the_users_sentences_speaks_as_the_user():
    wife = context("I live in Utrecht with my wife.")
    assert borrowed("I live in Utrecht with my wife.", wife, "").words == ("i", "live", "in")
    assert borrowed("Noted: I live in Utrecht with my wife.", wife, "") is None  # reported
    assert borrowed("You said: my name is Ann.", context("My name is Ann."), "") is None
    later = context("We grow tomatoes.", "I work at a school.", "Nice.")
    assert borrowed("I work at a bank.", later, "").words == ("i", "work", "at")
    # To a question, the user's words said back in the first person are the answer; a name
    # or role the user never gave is not.
    trip = context("Where am I travelling?", "I'm flying to Oslo. I'm a pilot.", "Nice.")
    assert borrowed("I'm flying to Oslo.", trip, "") is None
    assert borrowed("I'm a pilot.", trip, "") is None
    assert borrowed("I'm Sarah.", trip, "").words == ("Sarah",)
    # Common opening words are anyone's; the assistant may answer in the first person.
    happy = context("I am happy today.")
    for fine in ("I am happy to hear it.", "Nice to meet you, Nadia.", "I hope you rest."):
        assert borrowed(fine, happy, "") is None


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_that_keeps_speaking_as_someone_becomes_the_acknowledgement(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Hi there! I'm Sarah."
    job = chat("Hi there! I'm Nadia, I work as a nurse.", profile=profile)
    assert reply(job) == "Thanks for telling me."
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["persona"] * 3
    assert temperatures(runtime) == [0, 0.7, 0.7]
    # Each retry samples with a seed of its own, the call's number: the same conversation
    # gets the same replies again.
    assert [seed(request) for request in runtime.generate_requests()] == [None, 2, 3]
    AgentProfile.objects.filter(name=profile).update(acknowledgement_reply="Noted, Nadia.")
    assert reply(chat("I had a long shift today.", profile=profile)) == "Noted, Nadia."
    # A question still gets the unknown_reply.
    assert reply(chat("What is your name?", profile=profile)) == "I don't know."


def test_an_answer_about_the_user_that_names_only_what_they_never_said_borrows():
    asked = context("Which hue do I like best?", "My favourite colour is teal.", "Nice.")
    found = borrowed("I like blue.", asked, "")
    assert (found.problem, found.words) == ("unsupported", ("blue",))
    assert borrowed("You like teal best.", asked, "") is None
    assert borrowed("Teal, the colour of the sea.", asked, "") is None
    assert borrowed("I don't know.", asked, "") is None
    dog = context("What is my dog called?", "My dog is called Pixel.", "Nice.")
    assert borrowed("Your dog is called Max.", dog, "").words == ("max",)
    assert borrowed("Your dog is called Pixel.", dog, "") is None
    # Not a question about the user: the reply may name what it likes.
    weather = context("Tell me something nice about the weather.")
    assert borrowed("Sunny days in May are lovely.", weather, "") is None


def test_an_answer_to_what_the_user_told_that_uses_nothing_of_it_is_ungrounded():
    code = context("What is my locker code?", "My locker code is 4821.", "Good to know.")
    assert borrowed("I have a code for your locker.", code, "").problem == "ungrounded"
    assert borrowed("I'm sorry, I don't have a locker code.", code, "").problem == "ungrounded"
    assert borrowed("It is 4821.", code, "") is None
    assert borrowed("I don't know.", code, "") is None
    food = context("What am I allergic to?", "I am allergic to shellfish.", "Noted.")
    assert borrowed("You are allergic to nuts.", food, "").problem == "ungrounded"
    assert borrowed("Shellfish.", food, "") is None


def test_what_a_question_asks_about_is_found_by_its_words_or_by_meaning():
    told = context("Which artist do I admire most?", "My favourite painter is Vermeer.", "Ok.")
    assert told_about(told) == []
    assert [item.seq for item in told_about(told, similar={1})] == [1]
    # Nothing found by word or meaning: the reply names nothing the user said at all.
    assert borrowed("You admire art.", told, "").problem == "unfounded"
    assert borrowed("You admire art.", told, "", similar={1}).problem == "ungrounded"
    assert borrowed("You admire Vermeer.", told, "", similar={1}) is None


def test_an_answer_from_what_the_user_said_of_another_thing_of_theirs_is_never_said():
    sister = context("Where does my sister live?", "My brother lives in Leeds.", "Nice.")
    found = borrowed("Your sister lives in Leeds.", sister, "")
    assert (found.problem, found.words) == ("never_said", ("sister", "brother"))
    assert borrowed("I don't know.", sister, "") is None
    assert borrowed("You never told me about your sister.", sister, "") is None
    # The same thing, as the last part of a compound.
    fish = context("What did I call my fish?", "My goldfish is named Comet.", "Nice.")
    assert borrowed("You called it Comet.", fish, "") is None
    # A message that names no thing of the user's own may answer in other words.
    car = context("Where did I leave my vehicle?", "I parked the car on level 3.", "Ok.")
    assert borrowed("On level 3.", car, "") is None


def test_a_thing_the_user_has_is_named_without_my_too():
    cat = context("What is my dog's name?", "I have a black cat named Saffron.", "Nice.")
    assert borrowed("Saffron.", cat, "").words == ("dog", "cat")
    assert (
        borrowed(
            "Your cat is Saffron.",
            context("What is my cat's name?", "I have a cat named Saffron."),
            "",
        )
        is None
    )


def test_a_number_the_user_never_gave_is_unsupported_beside_what_they_did():
    car = context("What is my car's registration number?", "My car is a grey Skoda.", "Ok.")
    assert borrowed("It's a 1998 Skoda.", car, "").words == ("1998",)
    japanese = context("How long have I been learning Japanese?", "For two years now.", "Ok.")
    assert borrowed("Japanese, for 2 years.", japanese, "") is None
    # Number words up to ninety are the user's numbers in digits too, and the other way.
    cousins = context("How many cousins do I have?", "I have twelve cousins.", "Ok.")
    assert borrowed("You have 12 cousins.", cousins, "") is None
    assert borrowed("You have 13 cousins.", cousins, "").words == ("13",)
    stairs = context("How many steps has my staircase?", "It has 40 steps.", "Ok.")
    assert borrowed("It has forty steps.", stairs, "") is None


def test_an_answer_taken_from_what_the_user_said_of_another_thing_is_elsewhere():
    told = ("My sister is called Ann.", "Nice.", "My brother lives in Leeds.", "Good.")
    sister = context("Where does my sister live?", *told)
    found = borrowed("Your sister lives in Leeds.", sister, "")
    assert (found.problem, found.words) == ("elsewhere", ("brother",))
    wedding = context(
        "When is my sister's wedding?", "My sister's wedding is in June.", "Nice.",
        "The wedding has been pushed back to September.", "Oh.",
    )  # fmt: skip
    assert borrowed("It is in September.", wedding, "") is None
    sibling = context("When is my sibling's birthday?", "My sister's birthday is in May.", "Ok.")
    assert borrowed("In May.", sibling, "") is None


def test_an_answer_the_user_has_changed_since_is_outdated():
    told = ("The door code is 1234.", "Noted.", "They changed the door code to 9999.", "Ok.")
    code = context("What's the door code?", *told)
    found = borrowed("The door code is 1234.", code, "")
    assert (found.problem, found.words) == ("outdated", ("9999",))
    assert borrowed("It is 9999.", code, "") is None
    # A later message on the same thing with a fact of another kind changes nothing.
    city = context(
        "Which river do I love most?", "My favourite river is the Danube.", "Nice.",
        "On Saturday we walked by the river.", "Lovely.",
    )  # fmt: skip
    assert borrowed("The Danube.", city, "") is None


def test_a_colour_never_said_to_a_question_for_the_colour_of_what_the_user_told_is_unsupported():
    stairs = context("What colour is the stair carpet?", "We carpeted the stairs in teal.", "Nice.")
    assert borrowed("It's a light grey.", stairs, "").problem == "unsupported"
    assert borrowed("It's teal.", stairs, "") is None
    # Of something the user never spoke of: not judged so.
    sky = context("What colour is the sky on Mars?", "We carpeted the stairs in teal.", "Nice.")
    assert borrowed("It's butterscotch, or pink.", sky, "") is None


def test_colours_beyond_the_basic_ones_are_facts_an_update_changes():
    fence = context(
        "What colour is the fence?",
        "We planned to paint the fence ochre.",
        "Nice.",
        "In the end we painted the fence terracotta.",
        "Lovely.",
    )
    assert borrowed("It's ochre.", fence, "").problem == "outdated"
    assert borrowed("It's terracotta.", fence, "") is None


def test_an_answer_that_names_nothing_the_user_said_is_unfounded():
    rent = context("Who do I rent from?", "My landlady's name is Mrs. Abernathy.", "Nice.")
    for made_up in ("You rent from this place.", "Renters' insurance."):
        assert borrowed(made_up, rent, "").problem == "unfounded"
    assert borrowed("From Mrs. Abernathy.", rent, "") is None
    assert borrowed("I don't know.", rent, "") is None
    # Not of the user's own, but about what a message of theirs told (all its words).
    friend = context("What does Benedikt do?", "My friend Benedikt is a firefighter.", "Ok.")
    assert borrowed("He helps people.", friend, "").problem == "unfounded"
    assert borrowed("He is a firefighter.", friend, "") is None
    alarm = context("What's the alarm code at work?", "The alarm code at work is 5512.", "Ok.")
    assert borrowed("I don't have a code.", alarm, "").problem == "unfounded"  # nothing new
    assert borrowed("It is 5512.", alarm, "") is None


def test_an_answer_from_a_message_that_is_not_about_the_question_is_unfounded():
    rent = context(
        "Who do I rent from?", "My landlady's name is Mrs. Abernathy.", "Nice.",
        "I spent the morning at the library.", "Lovely.",
    )  # fmt: skip
    # Given the messages closest in meaning (the landlady's), a filler's words are no answer.
    assert borrowed("I rent from the library.", rent, "", relevant={1}).problem == "unfounded"
    assert borrowed("From Mrs. Abernathy.", rent, "", relevant={1}) is None
    assert borrowed("I rent from the library.", rent, "") is None  # without vectors: any
    # A later message sharing a word with the question is about it, however far in meaning.
    moved = context(
        "When is my sister's wedding?", "My sister's wedding is in June.", "Nice.",
        "The wedding has been pushed back to September.", "Ok.",
    )  # fmt: skip
    assert borrowed("In September.", moved, "", relevant={1}) is None


def test_an_answer_to_what_the_user_never_spoke_of_or_to_a_follow_up_is_not_judged():
    tomatoes = context("What is the best soil for tomatoes?", "I grow tomatoes.", "Nice.")
    assert borrowed("Loam with compost.", tomatoes, "") is None  # general knowledge
    garden = context("What about the garden?", "The garden needs water.", "Ok.")
    assert borrowed("Roses love the sun.", garden, "") is None  # more talk, not a fact


def test_what_supports_an_answer_is_the_users_words_the_telling_part_and_numbers():
    told = context("My dog is Rex. What is my dog called?")
    assert borrowed("Rex.", told, "") is None
    kids = context("How many kids do I have?", "I have two kids.", "Nice.")
    assert borrowed("You have two.", kids, "") is None
    # Asked what the assistant said, its replies support the answer too.
    named = context("What name did you suggest for my dog?", "Name my dog.", "How about Biscuit?")
    assert borrowed("Biscuit.", named, "") is None
    assert borrowed("Biscuit.", context("What name do I like?", "Name my dog.", "Biscuit?"), "")


def test_a_later_message_that_the_user_moved_or_switched_updates_without_a_shared_word():
    told = ("I live in Bilbao, but I grew up in Seville.", "Nice.", "I just moved to Valencia.")
    moved = context("Where do I live now?", *told, "Good luck.")
    for old in ("I live in Seville.", "Bilbao."):
        assert borrowed(old, moved, "").words == ("valencia",)
    assert borrowed("You live in Valencia.", moved, "") is None
    # Someone else's move, or the user's move of another thing of theirs, changes nothing.
    for other in ("My sister moved to Lisbon.", "I moved my sister's piano to Lisbon."):
        assert (
            borrowed("You live in Bilbao.", context("Where do I live?", told[0], "Ok.", other), "")
            is None
        )
    car = context(
        "What car do I have now?", "I drive a Peugeot.", "Ok.", "We sold it and bought a Mazda."
    )
    assert borrowed("A Peugeot.", car, "").words == ("mazda",)
    # The change names the old value again: the reply took the old one.
    sold = ("I drive a Peugeot.", "Ok.", "I sold the Peugeot and bought a Mazda.", "Ok.")
    assert borrowed("I have a Peugeot.", context("What car do I have now?", *sold), "").words == (
        "mazda",
    )
    for right in ("A Mazda.", "You sold the Peugeot and bought a Mazda."):
        assert borrowed(right, context("What car do I have now?", *sold), "") is None


@pytest.mark.parametrize(
    ("message", "subject"),
    [
        ("Where does my sister live?", ("sister",)),
        ("When is my sister's wedding?", ("sister", "wedd")),
        ("What's my new colleague's name?", ("colleagu",)),
        ("What's my seat number on the train?", ("seat",)),
        ("What's our greyhound called?", ("greyhound",)),
        ("What is my name?", ()),
        ("Where was I born?", ()),
    ],
)
def test_what_a_question_names_as_the_users_own_is_after_my_or_our(message, subject):
    assert asked_subject(message) == subject


@pytest.mark.parametrize(
    ("message", "recall"),
    [
        ("What is my locker code?", True),
        ("In which city do I live?", True),
        ("When does my bus leave?", True),
        ("When does the bus leave?", False),  # not of the user's own
        ("Do I have a dog?", False),  # a yes or a no
        ("What should I cook for my dinner?", False),  # advice
        ("What is the capital of France?", False),  # never spoken of
        ("How are you?", False),
        ("My dog is called Pixel.", False),
    ],
)
def test_a_question_asks_to_recall_what_the_user_or_the_conversation_told(message, recall):
    history = ("The bus leaves at noon.", "Good to know.", "I was born in France.", "Nice.")
    assert asks_to_recall(context(message, *history)) is recall


@pytest.mark.parametrize(
    ("message", "about_the_user"),
    [
        ("Which hue do I like best?", True),
        ("what is my locker code", True),
        ("Where was I born?", True),
        ("Tell me something nice about the weather.", False),
        ("My dog is called Pixel.", False),
        ("What is the capital of France?", False),
    ],
)
def test_a_question_about_the_user_is_one_that_asks_about_their_own(message, about_the_user):
    assert asks_about_the_user(message) is about_the_user


# --- Through the chat, in both prompt styles ------------------------------------------------


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_with_the_examples_facts_is_asked_again_with_sampling(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = scripted("I'm sorry, but you don't have a bike in the shed.", "Noted.")
    job = chat("I have a dog.", profile=profile)
    assert reply(job) == "Noted."
    [note] = notes(job, "reply_borrowed")
    assert note["kind"] == "example" and note["words"] == ["bike", "shed"]
    assert note["reply"] == "I'm sorry, but you don't have a bike in the shed."
    assert temperatures(runtime) == [0, 0.7]
    assert notes(job, "reply_replaced") == []


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_that_repeats_the_previous_one_is_asked_again(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = scripted("Good to know.", "A dog too, how nice.")
    assert reply(chat("I have a cat.", profile=profile)) == "Good to know."
    job = chat("I also have a dog.", profile=profile)
    assert reply(job) == "A dog too, how nice."
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["repeat"]


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_that_contradicts_the_user_is_asked_again(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("My favourite colour is teal.", profile=profile)
    runtime.reset()
    runtime.script = in_turn("I like blue.", "You like teal best.")
    job = chat("Which hue do I like best?", profile=profile)
    assert reply(job) == "You like teal best."
    [note] = notes(job, "reply_borrowed")
    assert (note["kind"], note["words"]) == ("unsupported", ["blue"])
    # The user's message shown again just before the question.
    asked_again(runtime, style)


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_that_keeps_borrowing_becomes_the_profiles_unknown_reply(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    AgentProfile.objects.filter(name=profile).update(unknown_reply="Sorry, I cannot say.")
    runtime.script = lambda prompt, body: "Nice."
    chat("My favourite colour is teal.", profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: "I like blue."
    job = chat("Which hue do I like best?", profile=profile)
    # With what the user said about it quoted (``conversations.quoting``).
    instead = "Sorry, I cannot say. You told me: “My favourite colour is teal.”"
    assert reply(job) == instead
    assert len(notes(job, "reply_borrowed")) == 3  # the first answer and two retries
    assert notes(job, "reply_quoted") == [{"sentence": "My favourite colour is teal."}]
    assert notes(job, "reply_replaced") == [{"reply": instead}]
    # The colour message shown again; the retries sample (an instruction-tuned model's
    # first one is the first to show it, greedily).
    asked_again(runtime, style)
    assert temperatures(runtime)[2] == 0.7


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_an_answer_about_what_the_user_never_named_is_unknown_at_once(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("My brother lives in Leeds.", profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: "Your sister lives in Leeds."
    job = chat("Where does my sister live?", profile=profile)
    assert reply(job) == "I don't know."
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["never_said"]
    assert temperatures(runtime) == [0]  # asking again cannot help


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_an_unfounded_answer_is_asked_again_then_unknown(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("My landlady's name is Mrs. Abernathy.", profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: "You rent from this place."
    job = chat("Who do I rent from?", profile=profile)
    assert reply(job) == "I don't know."
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["unfounded"] * 3
    assert temperatures(runtime) == [0, 0.7, 0.7]  # no message shares a word: none shown again


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_a_reply_from_a_message_far_from_the_question_is_unfounded(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("My landlady's name is Mrs. Abernathy.", profile=profile)
    chat("I spent the whole morning reading at the library.", profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: "I rent from the library."
    job = chat("Who do I rent from?", profile=profile)
    assert reply(job) == "I don't know."
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["unfounded"] * 3


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_an_answer_from_before_the_user_moved_is_asked_again_shown_the_move(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("I live in Bilbao, but I grew up in Seville.", profile=profile)
    chat("I just moved to Valencia.", profile=profile)
    runtime.reset()
    runtime.script = in_turn("I live in Seville.", "You live in Valencia.")
    job = chat("Where do I live now?", profile=profile)
    assert reply(job) == "You live in Valencia."
    [note] = notes(job, "reply_borrowed")
    assert (note["kind"], note["words"]) == ("outdated", ["valencia"])
    # Both messages shown again; the retry without the old one, greedily.
    asked_again(runtime, style, changed=True)


def test_a_reply_that_only_does_not_know_to_a_message_that_asks_nothing_abstained():
    kitten = context("I just adopted a kitten called Miso.")
    for reply_text in ("I don't know.", "I'm not sure.", "Sorry, I have no idea."):
        assert borrowed(reply_text, kitten, "").problem == "abstained"
    for doubt in ("I don't think so.", "I didn't think so.", "Hmm, I doubt it."):
        assert borrowed(doubt, kitten, "").problem == "abstained"
    assert borrowed("Hello! I don't know that name.", context("Hi, I'm Nadia."), "").problem == (
        "abstained"
    )
    # A longer reply that says more, and any reply to a question or a request, are not.
    long = "I don't know much about kittens, but Miso is a lovely name for one."
    assert borrowed(long, kitten, "") is None
    for asked in ("What is my cat called?", "Tell me my cat's name.", "The capital of Peru"):
        assert borrowed("I don't know.", context(asked), "") is None


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_not_knowing_to_a_statement_becomes_the_acknowledgement_at_once(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "I don't know."
    job = chat("I just adopted a kitten called Miso.", profile=profile)
    assert reply(job) == "Thanks for telling me."
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["abstained"]
    assert temperatures(runtime) == [0]  # there was nothing to know: not asked again
    # To a question, not knowing is the honest answer; what the user said closest to it
    # is quoted (``conversations.quoting``).
    runtime.reset()
    assert reply(chat("What is my dog called?", profile=profile)) == (
        "I don't know. You told me: “I just adopted a kitten called Miso.”"
    )


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_not_knowing_what_the_user_told_is_said_with_their_words_quoted(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("I'm the banjo player in a bluegrass group.", profile=profile)
    runtime.reset()
    runtime.script = lambda prompt, body: "I'm not sure."
    job = chat("What's my instrument in the bluegrass group?", profile=profile)
    told = "I'm the banjo player in a bluegrass group."
    assert reply(job) == f"I don't know. You told me: “{told}”"
    assert notes(job, "reply_quoted") == [{"sentence": told}]
    assert notes(job, "reply_borrowed") == []  # an honest answer: not asked again
    assert temperatures(runtime) == [0]
    [call] = Step.objects.filter(job=job, kind="model_call", name="reply")
    assert call.output["discarded"] == "quoted"
    # Nothing the user said is about it: nothing is quoted, and the reply says it does not
    # know in the profile's words.
    job = chat("What's my daughter's name?", profile=profile)
    assert reply(job) == "I don't know."
    assert notes(job, "reply_quoted") == []


def test_the_unknown_reply_says_i_dont_know_by_default():
    assert AgentProfile.objects.get(name="default").unknown_reply == "I don't know."
    assert chat_profile().unknown_reply == "I don't know."


def test_the_acknowledgement_thanks_the_user_by_default():
    assert AgentProfile.objects.get(name="default").acknowledgement_reply == (
        "Thanks for telling me."
    )
    assert chat_profile().acknowledgement_reply == "Thanks for telling me."


def test_a_question_for_the_users_name_is_about_their_introduction():
    asked = context(
        "What's my name?",
        "Hi! I'm Ines and I work as a nurse in Leeds.",
        "Nice to meet you.",
        "I have a dog called Pepper.",
        "That's nice.",
    )
    # The dog's message is the closest in meaning; the introduction shares no word.
    assert borrowed("Your name is Ines.", asked, EXAMPLE, similar={3}) is None
    assert borrowed("Your name is Sarah.", asked, EXAMPLE, similar={3}) is not None


def test_a_name_the_user_did_not_give_themselves_answers_another_question():
    asked = context(
        "What's my name?",
        "Hi! I'm Ines and I work as a nurse in Leeds.",
        "Nice to meet you.",
        "My wife is called Anna.",
        "Lovely.",
    )
    found = borrowed("Your name is Anna.", asked, EXAMPLE, similar={3})
    assert (found.problem, found.words) == ("elsewhere", ("anna",))
    assert borrowed("Your name is Ines.", asked, EXAMPLE, similar={3}) is None
    # No introduction in the prompt: nothing to judge the name by.
    unknown = context("What's my name?", "My wife is called Anna.", "Lovely.")
    assert borrowed("I don't know your name.", unknown, EXAMPLE) is None


def test_a_later_message_that_tells_a_change_in_so_many_words_outdates_any_word():
    told = (
        "Our running group meets at the lake.", "Nice.",
        "The running group meets at the stadium from now on.", "Ok.",
    )  # fmt: skip
    group = context("Where does the running group meet?", *told)
    assert borrowed("It meets at the lake.", group, "").words == ("stadium",)
    assert borrowed("At the stadium.", group, "") is None
    job = ("I work at the bakery.", "Nice.", "I quit the bakery and started at a bookshop.", "Ok.")
    work = context("Where do I work?", *job)
    assert borrowed("You work at the bakery.", work, "").problem == "outdated"
    assert borrowed("At a bookshop.", work, "") is None
    # A later message on the subject that tells no change outdates nothing but facts.
    lake = context(
        "Where does the running group meet?", "Our running group meets at the lake.", "Ok.",
        "The running group was great fun this week.", "Good.",
    )  # fmt: skip
    assert borrowed("At the lake.", lake, "") is None


def test_a_change_of_the_old_value_outdates_it_though_it_shares_no_word_with_the_question():
    trip = context(
        "Where am I travelling in July?", "We're planning a trip to Crete in July.", "Nice.",
        "Actually the trip moved to Rhodes instead of Crete.", "Ok.",
    )  # fmt: skip
    for old in ("You are going to Crete in July.", "Crete."):
        assert borrowed(old, trip, "").words == ("rhodes",)
    for right in ("You are going to Rhodes in July.", "Rhodes."):
        assert borrowed(right, trip, "") is None  # grounded by the change
    # A change told of a name the old value's message holds.
    sister = context(
        "Where does my sister live?", "My sister Henrike lives in Bremen.", "Nice.",
        "Henrike relocated to Leipzig in the spring.", "Ok.",
    )  # fmt: skip
    assert borrowed("She lives in Bremen.", sister, "").words == ("leipzig",)
    assert borrowed("She lives in Leipzig.", sister, "") is None
    # Days of the week in the plural are days too.
    club = context(
        "Which day does the reading group meet?", "Our book club meets on Tuesdays.", "Ok.",
        "We switched it to Thursdays instead of Tuesdays.", "Ok.",
    )  # fmt: skip
    for old in ("On Tuesdays.", "Tuesday."):
        assert borrowed(old, club, "").words == ("thursdays",)
    assert borrowed("On Thursdays.", club, "") is None
    # A change of something else of the same name, with no new fact of the reply's kind.
    brother = context(
        "Where does my brother live?", "My brother Tomas lives in Porto.", "Nice.",
        "Tomas moved his shop to a bigger street.", "Ok.",
    )  # fmt: skip
    assert borrowed("He lives in Porto.", brother, "") is None


def test_the_stale_messages_are_those_of_the_old_value_not_before_an_earlier_change_word():
    told = (
        "We switched choir practice to Thursdays instead of Tuesdays.", "Great.",
        "The dentist appointment is on the 4th of May.", "Lovely.",
        "They pushed the dentist appointment back to the 9th of May instead.", "Ok.",
    )  # fmt: skip
    dentist = context("When do I see the dentist?", *told)
    reply = "You see the dentist on the 4th of May."
    found = borrowed(reply, dentist, "")
    assert found.problem == "outdated"
    assert stale_seqs(reply, dentist, found.words) == {3, 4}


def test_a_thing_named_by_a_longer_word_of_the_same_root_is_the_same_thing():
    plumbing = context("Who does my plumbing?", "My plumber is Mr. Kerr.", "Nice.")
    assert borrowed("Mr. Kerr does your plumbing.", plumbing, "") is None
    # Not by a root of three letters, nor by a shared beginning alone.
    mother = context("Where does my grandmother live?", "My grandfather lives in Cork.", "Ok.")
    assert borrowed("Your grandmother lives in Cork.", mother, "").problem == "never_said"


def test_a_request_to_be_reminded_asks_something_back():
    gate = context("Can you remind me of the gate code?", "The gate code is 5521.", "Noted.")
    assert borrowed("Yes, I know.", gate, "").problem == "unfounded"
    assert borrowed("It is 5521.", gate, "") is None


def test_a_question_in_other_forms_of_the_words_a_message_told_is_judged():
    told = context("Where is the cookery class?", "The cooking class is in Parma.", "Nice.")
    assert borrowed("It is in a kitchen.", told, "").problem == "unfounded"
    assert borrowed("In Parma.", told, "") is None


def test_things_the_user_has_are_named_by_a_count_too():
    geese = context("What are my ducks called?", "I have two geese.", "Nice.")
    assert borrowed("Your ducks are called geese.", geese, "").problem == "never_said"


def test_a_reply_that_only_says_the_questions_words_in_other_forms_is_unfounded():
    told = context("Who teaches my son?", "My son's teacher is Mr. Abbas.", "Nice.")
    assert borrowed("I'm a teacher.", told, "").problem == "unfounded"
    assert borrowed("Mr. Abbas.", told, "") is None


def test_a_reply_without_a_number_to_a_question_for_one_is_no_number():
    car = context("What is my van's licence number?", "My van is a white Ford.", "Ok.")
    assert borrowed("It's a Ford.", car, "").problem == "no_number"
    assert borrowed("I don't know.", car, "") is None
    pin = context("How old is my nephew?", "My nephew Sam is nine.", "Ok.")
    assert borrowed("He is nine.", pin, "") is None
    assert borrowed("Sam is 9 years old.", pin, "") is None
    # A question that asks for no number, or a statement, is not judged so.
    assert (
        borrowed("It's a Ford.", context("What make is my van?", "My van is a Ford."), "") is None
    )


def test_a_question_about_a_thing_named_in_another_form_finds_its_messages():
    told = ("Our teacher is Rosa.", "Ok.", "Rosa left; our new teacher is Ilse.", "Ok.")
    nanny = context("Who teaches us now?", *told)
    assert [item.seq for item in told_about(nanny)] == [1, 3]
    assert not borrowed("Ilse.", nanny, "", relevant={1})


def test_a_number_of_tens_and_units_in_words_is_one_number():
    assert numbers("He turns twenty-one, then twenty one, not thirty.") == {"21", "30"}
    grandson = context("How old is my grandson?", "My grandson is twenty-one.", "Ok.")
    assert borrowed("He is 21.", grandson, "") is None
    assert borrowed("He is 20.", grandson, "").words == ("20",)
    digits = context("How old is my grandson?", "My grandson is 21.", "Ok.")
    assert borrowed("He is twenty-one.", digits, "") is None


def test_an_answer_the_update_names_as_the_old_value_is_outdated():
    told = ("Our cleaner is Dorota.", "Ok.")
    stopped = context(
        "Who cleans for us now?", *told,
        "Dorota stopped working for us; our cleaner is Agnieszka.", "Ok.",
    )  # fmt: skip
    found = borrowed("Your cleaner is Dorota.", stopped, "")
    assert (found.problem, found.words) == ("outdated", ("agnieszka",))
    assert borrowed("Agnieszka.", stopped, "") is None
    teacher = ("Our teacher is Rosa.", "Ok.", "Rosa left; our new teacher is Ilse.", "Ok.")
    assert borrowed("Rosa.", context("Who teaches us?", *teacher), "").words == ("ilse",)
    # A new name beside the old value, of something else, changes nothing.
    sister = context(
        "What's my sister's name?", "My sister is Ann.", "Ok.",
        "My sister Ann has a new friend called Bob.", "Ok.",
    )  # fmt: skip
    assert borrowed("Ann.", sister, "") is None


def test_a_number_asked_of_what_the_user_told_must_be_one_they_gave():
    lock = context("What numbers open the bike lock?", "The bike lock combination is 6381.", "Ok.")
    assert borrowed("It's 4471.", lock, "").words == ("4471",)
    assert borrowed("6381.", lock, "") is None
    # A number asked of nothing the user told is general knowledge: not judged.
    legs = context("How many legs does a spider have?", "I like cats.", "Ok.")
    assert borrowed("It has 8 legs.", legs, "") is None


def test_what_names_the_thing_asked_about_is_no_answer_about_it():
    friend = context("What does Benedikt do?", "My oldest friend, Benedikt, is a firefighter.")
    assert borrowed("He's a good friend.", friend, "").problem == "unfounded"
    assert borrowed("He's a firefighter.", friend, "") is None
    assert (
        borrowed(
            "Benedikt.",
            context(
                "What's my oldest friend's name?", "My oldest friend, Benedikt, is a firefighter."
            ),
            "",
        )
        is None
    )


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_an_old_value_the_update_names_is_asked_again_shown_the_update(chat, runtime, style):  # noqa: F811
    profile = styled(style)
    runtime.script = lambda prompt, body: "Nice."
    chat("Our cleaner is Dorota.", profile=profile)
    chat("Dorota stopped working for us; our cleaner is Agnieszka now.", profile=profile)
    runtime.reset()
    runtime.script = in_turn("Dorota.", "Agnieszka.")
    job = chat("Who cleans for us now?", profile=profile)
    assert reply(job) == "Agnieszka."
    [note] = notes(job, "reply_borrowed")
    assert (note["kind"], note["words"]) == ("outdated", ["agnieszka"])
    asked_again(runtime, style, changed=True)  # the retry without the old value


BERTH = (
    "Our narrowboat's mooring is berth 9.",
    "Ok.",
    "The harbourmaster reassigned our boat to berth 34 by the footbridge.",
    "Ok.",
    "Thanks! Dan and I moved everything about the dentist appointment tonight.",
    "Ok.",
)


def test_a_change_far_in_meaning_from_the_question_makes_no_answer_outdated():
    berth = context("Which berth is our boat moored at?", *BERTH)
    # "I moved ..." reads as a change of the user's own, whatever it moved ...
    assert borrowed("Berth 34.", berth, "").problem == "outdated"
    # ... unless its meaning is known to be far from the question's.
    assert borrowed("Berth 34.", berth, "", unrelated={5}) is None
    assert borrowed("Berth 9.", berth, "", unrelated={5}).words == ("34",)
    # A filler that changed nothing asked grounds no reply either.
    filler = "Dan and I moved everything."
    assert borrowed(filler, berth, "", unrelated={5}).problem == "ungrounded"


def test_the_agent_knows_a_change_far_in_meaning_from_the_question(chat, runtime):  # noqa: F811
    runtime.script = lambda prompt, body: "Ok."
    for message in BERTH[::2]:
        chat(message)
    runtime.reset()
    runtime.script = lambda prompt, body: "Berth 34."
    job = chat("Which berth is our boat moored at?")
    assert reply(job) == "Berth 34."
    assert notes(job, "reply_borrowed") == []


def test_a_reply_without_a_time_to_a_question_that_asks_when_is_no_time():
    heating = context("When is the heating man visiting?", "The boiler engineer comes on Friday.")
    assert borrowed("He's coming to the office.", heating, "").problem == "no_time"
    assert borrowed("On Friday.", heating, "") is None
    assert borrowed("I don't know.", heating, "") is None
    lesson = context("What time is my piano lesson?", "My piano lesson is at 5 pm.", "Ok.")
    assert borrowed("At the school.", lesson, "").problem == "no_time"
    for answered in ("At 5 pm.", "It is at five."):
        assert borrowed(answered, lesson, "") is None


def test_a_question_for_what_the_user_told_with_no_number_needs_no_number():
    hint = context("What is my bank PIN hint?", "My bank PIN hint is pumpkin.", "Noted.")
    assert borrowed("It's pumpkin.", hint, "") is None
    assert borrowed("It's a vegetable.", hint, "").problem == "ungrounded"
    # A number still, when the message on it names one or does not hold the question's words.
    pin = context("What is my bank PIN?", "My bank PIN is 4412.", "Noted.")
    assert borrowed("It's your bank.", pin, "").problem == "no_number"
    niece = context("How old is my niece?", "My niece lives in Cardiff.", "Nice.")
    assert borrowed("She lives in Cardiff.", niece, "").problem == "no_number"


def test_a_day_or_date_never_said_to_a_question_when_of_what_the_user_told_is_unsupported():
    told = "The roofer is booked for Thursday."
    roof = context("Which day is the roof being mended?", told, "Ok.")
    assert borrowed("It's the 15th.", roof, "").words == ("15",)
    assert borrowed("Monday, then Tuesday.", roof, "").words == ("monday", "tuesday")
    assert borrowed("On Thursday.", roof, "") is None
    standup = context("When is the standup?", "The standup is at 9:30.", "Ok.")
    assert borrowed("It's at 9:30.", standup, "") is None
    assert borrowed("At 10:15.", standup, "") is not None  # unfounded, checked first


def test_a_reply_naming_no_colour_to_a_colour_told_in_one_is_no_colour():
    fence = context("What colour is the fence?", "In the end we painted the fence ochre.", "Ok.")
    assert borrowed("It is very dark.", fence, "").problem == "no_colour"
    assert borrowed("It's ochre.", fence, "") is None
    # What the user told names no colour the checks know: any reply may be its answer.
    car = context("What colour is the van?", "The van is a sort of sea-glass shade.", "Ok.")
    assert borrowed("Sea-glass.", car, "") is None


def test_the_assistant_naming_itself_to_a_question_about_someone_else_is_a_persona():
    tuner = context(
        "Who looks after the harpsichord's tuning?", "Bertrand tunes my harpsichord.", "Ok."
    )
    for said in ("I'm the tuner.", "I am the assistant."):
        assert borrowed(said, tuner, "").problem == "persona"
    assert borrowed("Bertrand does.", tuner, "") is None
    assert borrowed("I'm your assistant.", context("Who are you?"), "") is None
    # Asked about someone, not "Who": the assistant is not them either.
    lukas = context("What is Lukas's surname?", "Our neighbour Lukas walks our dog.", "Ok.")
    assert borrowed("My name is Lukas.", lukas, "").problem == "persona"
    teach = context("What do I do?", "I teach maths.", "Ok.")
    assert borrowed("I'm a maths teacher.", teach, "") is None  # the user's voice, not a persona


def test_a_reply_that_says_what_the_user_told_is_not_so_is_denied():
    choir = context("Which part do I sing in the choir?", "I sing tenor in the choir.", "Ok.")
    assert borrowed("I'm sorry, I don't sing tenor.", choir, "").problem == "denied"
    assert borrowed("You sing tenor.", choir, "") is None
    assert borrowed("I don't know.", choir, "") is None  # not knowing denies nothing
    # What the user said is a "not": a reply may say it.
    meat = context("What don't I eat?", "I don't eat meat any more.", "Ok.")
    assert borrowed("You don't eat meat.", meat, "") is None


def test_a_name_never_said_asked_about_and_answered_with_another_is_never_said():
    riga = context("Which hotel did I stay at in Riga?", "I visited Tallinn in March.", "Ok.")
    found = borrowed("You were in Tallinn in March.", riga, "")
    assert (found.problem, found.words) == ("never_said", ("riga",))
    told = context("Which hotel did I stay at in Riga?", "In Riga I stayed at the Bern.", "Ok.")
    assert borrowed("You stayed at the Bern.", told, "") is None


def test_a_reply_naming_no_one_to_who_when_the_user_named_someone_is_no_name():
    tuner = context(
        "Who looks after the harpsichord's tuning?", "Bertrand tunes my harpsichord.", "Ok."
    )
    for said in ("I think you're right.", "It's a very big job."):
        assert borrowed(said, tuner, "").problem == "no_name"
    assert borrowed("Bertrand.", tuner, "") is None
    # The user named no one: a reply naming no one may be the answer.
    baker = context("Who bakes our bread?", "The bakery on the corner bakes our bread.", "Ok.")
    assert borrowed("The bakery on the corner.", baker, "") is None


def test_a_reply_with_the_value_of_a_message_retrieval_left_out_as_replaced_is_outdated():
    old = Item(seq=3, role="user", content="The book club meets at the library.", tokens=1)
    new = Item(seq=9, role="user", content="The book club has moved to the tea room.", tokens=1)
    club = context("Where does the book club meet?", "Nice weather today.", "It is.")
    club.retrieved, club.replaced = [new], [replace(old, replaced_by=new.seq)]
    found = borrowed("The library.", club, "")
    assert (found.problem, found.words) == ("outdated", ("mov", "room", "tea"))
    assert borrowed("The tea room.", club, "") is None
    assert borrowed("It moved from the library to the tea room.", club, "") is None
    club.replaced = [replace(old, replaced_by=42)]  # what replaced it is not in the prompt
    assert borrowed("The library.", club, "") is None


def test_a_reply_that_promises_an_answer_instead_of_giving_one_is_deferred():
    """Seen with Gemma 3 270M, asked again after a copied reply: "I'll tell you about it."."""
    pills = context("Which painkiller did the doctor prescribe me?", "I slept badly.", "Oh.")
    for said in ("I'll tell you about it.", "Let me check that for you.", "I will let you know."):
        found = borrowed(said, pills, "")
        assert (found.problem, found.describe()) == (
            "deferred",
            "The reply promises an answer instead of giving one.",
        )
    # Naming a fact, it gives one; saying it does not know is honest; to no question, fine.
    assert borrowed("I'll tell you: it was Naproxen.", pills, "") is None
    assert borrowed("I'll tell you when I know, I don't know yet.", pills, "") is None
    told = context("I'm seeing the doctor tomorrow.", "I slept badly.", "Oh.")
    assert borrowed("I'll tell you about it later.", told, "") is None
