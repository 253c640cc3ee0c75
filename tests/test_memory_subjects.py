"""A second round of retrieval on the question's subject alone (``conversations.subjects``):
a relation said in other words finds the message that names someone, and the name brings
the facts about them."""

import pytest

from agents.models import Step
from conversations import entities, vectors
from conversations.models import Message
from conversations.retrieval import find_messages
from conversations.subjects import subject_phrases
from tests.test_chat import chat, long_conversation, owner_key, reply_of  # noqa: F401
from tests.test_context import conversation_with, owner  # noqa: F401
from tests.test_memory_links import filler

pytestmark = pytest.mark.django_db

OTHER_HALF = "What subject does my brother's other half teach, and where is she from?"


def test_a_questions_subject_phrases_are_its_openings_after_a_possessive_or_the():
    assert subject_phrases(OTHER_HALF) == [
        ["my brother's", "my brother's other", "my brother's other half",
         "my brother's other half teach"],
    ]  # fmt: skip
    assert subject_phrases("How do I reach the man who fixes our pipes, and when?") == [
        ["the man", "the man who", "the man who fixes", "the man who fixes our",
         "the man who fixes our pipes"],
    ]  # fmt: skip
    assert subject_phrases("Where did I park?") == []


def test_names_of_any_alphabet_are_names():
    texts = ["My guitar teacher is Joaquín.", "Émile's bike is blue."]
    assert entities.names(texts) == ["Joaquín", "Émile"]


def test_a_relation_in_other_words_is_found_by_the_subject_and_brings_the_facts(owner):  # noqa: F811
    contents = filler(200)
    contents[20] = "My brother's partner is Svetlana."
    contents[90] = "Svetlana teaches chemistry."
    contents[150] = "Svetlana grew up in Novosibirsk."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(conversation_id=conversation.pk, query=OTHER_HALF, limit=10)
    rows = {row["seq"]: row for row in found.rows}
    assert rows[21]["about"].startswith("my brother's")
    assert {91, 151} <= rows.keys()


def test_a_subject_that_finds_nothing_standing_out_adds_nothing(owner):  # noqa: F811
    contents = filler(200)
    contents[20] = "My brother's partner is Svetlana."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(
        conversation_id=conversation.pk, query="When does the train to the coast leave?", limit=10
    )
    assert not [row for row in found.rows if "about" in row]


def test_a_chat_finds_facts_about_someone_its_question_names_by_another_relation(
    chat,  # noqa: F811
    runtime,
    owner_key,  # noqa: F811
):
    facts = {101: "My brother's partner is Svetlana.", 1501: "Svetlana teaches chemistry."}
    long_conversation(owner_key, 3000, facts=facts)
    vectors.embed_pending(conversation_id=Message.objects.get(seq=101).conversation_id)
    runtime.script = lambda prompt, body: "Chemistry." if facts[1501] in prompt else "No idea."
    data = chat("Which subject does my brother's other half teach?")
    assert reply_of(data["job_id"]) == "Chemistry."
    search = Step.objects.get(job_id=data["job_id"], name="search_history")
    messages = {m["content"]: m for m in search.output["result"]["messages"]}
    assert messages[facts[101]]["about"].startswith("my brother's")


def test_a_subject_that_finds_someone_else_brings_nothing(owner):  # noqa: F811
    contents = filler(200)
    contents[20] = "My sister is Ana."
    contents[90] = "Ana's birthday is 3 May."
    contents[150] = "Ana lives in Oslo."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    # "my brother's" finds "My sister is Ana." alone, but Ana's facts read together fit
    # the question less than alone: they are about someone else.
    found = find_messages(
        conversation_id=conversation.pk, query="What is my brother's name?", limit=10
    )
    assert not [row for row in found.rows if "about" in row]
