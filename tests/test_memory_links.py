"""What a search's hits bring along: words related to the question's for messages without a
vector yet (``conversations.vectors_words``), rare names two candidates share, and newer
messages about what a hit says (``conversations.linked``); the newest of a topic marked by
meaning, not by how close each hit is to the question."""

from dataclasses import replace

import numpy as np
import pytest
from django.utils import timezone

from conversations import arrange, linked, retrieval, vectors, vectors_words
from conversations.history import Item
from conversations.models import MessageEmbedding
from conversations.retrieval import find_messages
from tests.test_chat import long_conversation, owner_key  # noqa: F401
from tests.test_context import conversation_with, owner  # noqa: F401
from tests.test_memory import FACTS, conversation_of_facts
from tests.test_memory_current import hit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_word_vectors():
    vectors_words.forget()
    yield
    vectors_words.forget()


def test_a_paraphrase_finds_a_message_without_a_vector_through_related_words(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key)
    assert not MessageEmbedding.objects.filter(conversation=conversation).exists()
    found = find_messages(
        conversation_id=conversation.pk, query="Where did I leave my vehicle?", limit=5
    )
    assert FACTS[3] in [row["content"] for row in found.rows]


def test_related_words_are_looked_for_only_while_some_messages_lack_a_vector(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key)
    vectors.embed_pending(conversation_id=conversation.pk)
    assert vectors_words.vocabulary(conversation.pk, 10**6, "local:x") != []  # another model
    find_messages(conversation_id=conversation.pk, query="Where did I leave my vehicle?", limit=5)
    assert len(vectors_words._vectors) == 0


def filler(count: int) -> list[str]:
    topics = ("the printer", "lunch", "the weather", "the train", "a film", "the budget")
    return [f"We talked about {topics[n % 6]} again, nothing new ({n})." for n in range(count)]


def test_messages_that_name_a_rare_name_two_candidates_share_are_kept(owner):  # noqa: F811
    contents = filler(200)
    contents[20] = "My cousin is Rafael."
    contents[90] = "Rafael is getting married in June."
    contents[150] = "Rafael's fiancée is from Lisbon."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(
        conversation_id=conversation.pk,
        query="When is my cousin's wedding and where is his partner from?",
        limit=10,
    )
    kept = [row["content"] for row in found.rows]
    assert {contents[20], contents[90], contents[150]} <= set(kept)


def test_a_newer_message_about_what_a_hit_says_is_kept(owner):  # noqa: F811
    contents = filler(200)
    contents[30] = "I work at Nordlicht Bank as an analyst."
    contents[160] = "I left the bank and started a new job at Solaris Energy."
    contents[180] = "The printer on the second floor is broken again."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    row = {"role": "user", "content": ""}
    kept = [{**row, "seq": 31}]
    candidates = [{**row, "seq": seq} for seq in (11, 161, 181)]
    newer = linked.newer_neighbours(conversation.pk, kept, candidates)
    assert [(row["seq"], row["updates"]) for row in newer] == [(161, 31)]
    found = find_messages(
        conversation_id=conversation.pk, query="Where do I work as an analyst?", limit=10
    )
    assert {31, 161} <= {row["seq"] for row in found.rows}


def test_the_newest_of_hits_close_in_meaning_is_marked_not_a_newer_unrelated_one(owner):  # noqa: F811
    contents = filler(100)
    contents[2], contents[40] = "I live in Lyon.", "I moved to Porto, so I live there now."
    contents[80] = "The printer on the second floor is broken again."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    lyon = hit(3, "user", contents[2], 0.6, days=90)
    porto = hit(41, "user", contents[40], 0.52, days=20)
    printer = hit(81, "user", contents[80], 0.4, days=2)
    groups = [[lyon], [porto], [printer]]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert {item.seq: item.mark for item in arranged} == {3: "", 41: "most recent", 81: ""}


def test_a_newer_hit_about_as_relevant_as_a_rival_of_the_best_is_the_current_one(owner):  # noqa: F811
    contents = filler(100)
    contents[2] = "My favourite author is Haruki Murakami."
    contents[6] = "Murakami has been my favourite writer for years."
    contents[44] = "These days Ursula Le Guin is the author I love most."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    first = hit(3, "user", contents[2], 0.675, days=90)
    again = hit(7, "user", contents[6], 0.552, days=80)
    newest = hit(45, "user", contents[44], 0.513, days=30)
    groups = [[first], [again], [newest]]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    # The best, 0.16 more similar to the question, is not replaced; its rival is.
    assert {item.seq: (item.mark, item.replaced_by) for item in arranged} == {
        3: ("", None),
        7: ("", 45),
        45: ("most recent", None),
    }


def test_a_newer_line_about_as_relevant_as_a_rival_but_far_from_it_is_not_current(owner):  # noqa: F811
    contents = filler(200)
    contents[54] = "Our accountant is Bernard."
    contents[76] = "Bernard needs the receipts by April."
    contents[150] = (
        "Sure. I noted that the holiday photos comes first, then the ancient trophy; Paul "
        "will be at the garden on Monday if anything changes. Thanks! Mia and I booked "
        "everything about the dentist appointment yesterday. The office was busy, but it all "
        "worked out in the end. Could you remind Ida about the broken printer? I think it "
        "was ordered last week near the library, together with the muddy kettle."
    )
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    best = hit(77, "user", contents[76], 0.531, days=40)
    accountant = hit(55, "user", contents[54], 0.387, days=60)
    chatter = hit(151, "user", contents[150], 0.368, days=20)
    groups = [[best], [accountant], [chatter]]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert {item.seq: (item.mark, item.replaced_by) for item in arranged}[151] == ("", None)
    assert {item.seq: item.replaced_by for item in arranged}[55] is None


def test_the_closest_message_said_after_a_hit_is_kept_however_unlike_the_question(owner):  # noqa: F811
    contents = filler(200)
    contents[30] = "We get our vegetables from the Saturday market."
    contents[150] = (
        "We've stopped going to the market; a veg box from Hilltop Farm arrives every Friday now."
    )
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(
        conversation_id=conversation.pk, query="Where do our vegetables come from?", limit=10
    )
    rows = {row["seq"]: row for row in found.rows}
    assert rows[151]["updates"] == 31
    assert rows[151]["similarity"] < rows[31]["similarity"] - linked.QUESTION_MARGIN
    groups = [[Item.from_row(row)] for row in found.rows]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert {item.seq: item.mark for item in arranged}[151] == "most recent"


def test_a_later_message_about_someone_else_is_not_taken_for_an_update(owner):  # noqa: F811
    contents = filler(200)
    contents[30] = "I'm vegetarian."
    contents[150] = "Ingrid is vegetarian."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    row = {"role": "user", "content": contents[30], "similarity": 0.35}
    newer = linked.newer_neighbours(
        conversation.pk, [{**row, "seq": 31}], [{**row, "seq": 151, "content": contents[150]}]
    )
    assert newer == []


def test_the_same_text_said_again_counts_once_among_the_closest():
    nearest = [(40, 0.61), (90, 0.61), (12, 0.58), (70, 0.4)]
    assert linked._distinct(nearest) == [(90, 0.61), (12, 0.58), (70, 0.4)]


def test_a_line_about_the_topic_does_not_outrank_what_changed_the_best_hit(owner):  # noqa: F811
    contents = filler(100)
    contents[2] = "My dentist appointment is on the 4th of May."
    contents[40] = "The dentist rang and moved my appointment to the 11th of May."
    contents[80] = "Ok. (the dentist appointment)"
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    first = hit(3, "user", contents[2], 0.863, days=90)
    moved = replace(hit(41, "user", contents[40], 0.768, days=50), updates=3)
    line = hit(81, "user", contents[80], 0.747, days=10)
    groups = [[first], [moved], [line]]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert {item.seq: item.mark for item in arranged} == {3: "", 41: "most recent", 81: ""}


def test_a_reply_among_the_closest_after_the_best_hit_is_not_marked_as_its_update(owner):  # noqa: F811
    contents = filler(100)
    contents[2] = "My sister lives in Nantes."
    contents[41] = "Could you remind Mia about the weekend trip? I think it was moved yesterday."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    best = hit(3, "user", contents[2], 0.514, days=60)
    reply = replace(hit(42, "assistant", contents[41], 0.386, days=5), updates=3)
    arranged = arrange.arrange(conversation.pk, [[best], [reply]], timezone.now(), paired=0)
    assert {item.seq: item.mark for item in arranged} == {3: "", 42: ""}


@pytest.mark.parametrize(
    ("embedded", "before_seq", "lacking"),
    [
        (range(1, 11), None, False),
        ([], None, True),
        (range(2, 11), None, True),  # the first
        ([*range(1, 5), *range(6, 11)], None, True),  # one between
        (range(1, 10), None, True),  # the last
        (range(1, 10), 10, False),  # ... not below the bound
        (range(1, 5), 5, False),
    ],
)
@pytest.mark.parametrize("counted", [False, True])
def test_a_message_without_a_vector_is_noticed_wherever_it_is(
    owner_key,  # noqa: F811
    embedded,
    before_seq,
    lacking,
    counted,
    monkeypatch,
):
    conversation = long_conversation(owner_key, 10)
    if counted:  # too many gaps to ask for: the messages are counted
        monkeypatch.setattr(retrieval, "MAX_SKIPPED", -1)
    seqs = np.array(list(embedded), dtype=np.int64)
    assert retrieval._without_vector(conversation.pk, before_seq, seqs) is lacking
