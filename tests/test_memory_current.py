"""Memory that knows what is current: messages found by their words before they have a
vector, nothing injected when nothing fits, pairs kept together, the newest of several
hits marked and read last, a second round through names, a block a small model can read."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import PromptStyle, Step
from conversations import arrange, entities, vectors
from conversations.clipping import clip
from conversations.history import Item, ago, retrieved_lines
from conversations.models import Message, MessageEmbedding
from conversations.render import transcript
from conversations.retrieval import find_messages
from conversations.summary import clean_summary
from tests.test_chat import chat, long_conversation, owner_key, reply_of  # noqa: F401
from tests.test_context import build, conversation_with, owner, profile  # noqa: F401
from tests.test_memory import FACTS, conversation_of_facts

pytestmark = pytest.mark.django_db


def test_a_message_without_a_vector_is_found_by_its_words_among_embedded_ones(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key)
    vectors.embed_pending(conversation_id=conversation.pk)
    MessageEmbedding.objects.filter(conversation=conversation, seq=15).delete()
    found = find_messages(
        conversation_id=conversation.pk, query="wifi password tulip-9981", limit=3
    )
    assert found.mode == "hybrid"
    assert found.rows[0]["seq"] == 15
    # Found by its words, it was embedded on the spot (and is judged by its meaning too).
    assert MessageEmbedding.objects.filter(conversation=conversation, seq=15).exists()
    assert found.rows[0]["similarity"] > 0.5


def test_a_question_about_something_never_said_finds_nothing_and_says_what_was_left_out(
    owner_key,  # noqa: F811
):
    conversation = conversation_of_facts(owner_key)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(
        conversation_id=conversation.pk, query="What is my brother's name?", limit=10
    )
    assert found.rows == []
    assert found.dropped and all("below the floor" in d["reason"] for d in found.dropped)


def test_the_catch_up_embeds_the_oldest_messages_first(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 10)
    vectors.embed_pending(conversation_id=conversation.pk, limit=3)
    embedded = MessageEmbedding.objects.filter(conversation=conversation)
    assert sorted(embedded.values_list("seq", flat=True)) == [1, 2, 3]


def hit(seq: int, role: str, content: str, similarity: float | None = None, days: int = 0):
    then = timezone.now() - timedelta(days=days)
    return Item(seq=seq, role=role, content=content, tokens=8, created_at=then,
                similarity=similarity)  # fmt: skip


def test_a_retrieved_reply_brings_the_message_before_it(owner):  # noqa: F811
    conversation = conversation_with(owner, ["Please order the blender.", "Done. Order 5521."])
    reply = hit(2, "assistant", "Done. Order 5521.", 0.6)
    arranged = arrange.arrange(conversation.pk, [[reply]], timezone.now())
    assert [(item.seq, item.content) for item in arranged] == [
        (1, "Please order the blender."),
        (2, "Done. Order 5521."),
    ]


def test_the_newest_of_several_hits_about_one_thing_is_marked_and_replaces_the_older(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2], contents[40] = "I live in Lyon.", "I moved to Porto last month."
    conversation = conversation_with(owner, contents)
    lyon = hit(3, "user", "I live in Lyon.", 0.5, days=90)
    porto = hit(41, "user", "I moved to Porto last month.", 0.42, days=20)
    arranged = arrange.arrange(conversation.pk, [[lyon], [porto]], timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged] == [
        (41, "most recent", None),
        (3, "", 41),
    ]
    agent = profile(prompt_style=PromptStyle.TRANSCRIPT, tools=[])
    context = build(conversation, agent, "Where do I live now?", retrieved=arranged)
    block = transcript(context).split("Earlier in the conversation:\n")[1].split("\n\n")[0]
    # The stale value is left out: a small model cannot answer it; the step says why.
    assert block.splitlines() == [
        "#41 (2 weeks ago, most recent) User: I moved to Porto last month.",
    ]
    assert context.stats()["replaced"] == [{"seq": 3, "by": 41}]
    assert context.used <= context.budget


def test_a_hit_found_alone_is_marked_most_recent_only_after_an_earlier_message_about_it(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[10], contents[50] = (
        "Our cleaner Bozena comes on Wednesdays.",
        "Bozena comes on Thursdays now.",
    )
    contents[31] = "Noted: Bozena comes on Mondays."  # the assistant's
    contents[21], contents[60] = "Your dentist is Dr. Halvorsen.", "My dentist is Dr. Halvorsen."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    # The older value was left out (the floor, a low rank): the newer is still the newest of
    # what the user said about it.
    newer = hit(51, "user", contents[50], 0.6, days=10)
    [arranged] = arrange.arrange(conversation.pk, [[newer]], timezone.now(), paired=0)
    assert (arranged.seq, arranged.mark, arranged.rank) == (51, "most recent", -2)
    # The first thing the user said about it, found alone, is not marked.
    older = hit(11, "user", contents[10], 0.6, days=60)
    [arranged] = arrange.arrange(conversation.pk, [[older]], timezone.now(), paired=0)
    assert (arranged.seq, arranged.mark) == (11, "")
    # Nor is one whose only earlier message about it is the other speaker's.
    dentist = hit(61, "user", contents[60], 0.6, days=5)
    [arranged] = arrange.arrange(conversation.pk, [[dentist]], timezone.now(), paired=0)
    assert (arranged.seq, arranged.mark) == (61, "")


def test_what_a_replaced_hit_named_is_replaced_too_but_a_crowd_far_below_replaces_nothing(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2], contents[20] = "I live in Lyon.", "Home for me is Lyon."
    contents[40] = "I moved to Porto last month."
    conversation = conversation_with(owner, contents)
    lyon = hit(3, "user", contents[2], 0.37, days=90)
    home = Item(**{**hit(21, "user", contents[20], 0.25, days=60).__dict__, "via": "Lyon"})
    porto = hit(41, "user", contents[40], 0.42, days=20)
    groups = [[porto], [lyon], [home]]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert {item.seq: item.replaced_by for item in arranged} == {41: None, 3: 41, 21: 41}
    # A newer message about the same thing but far less relevant (chat about "the dentist
    # appointment" beside "My dentist is Dr. Halvorsen.") is marked, and replaces nothing.
    contents[60] = "My dentist is Dr. Halvorsen on Pine Street."
    contents[80] = "Thanks! Ida and I moved everything about the dentist appointment tomorrow."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    dentist = hit(61, "user", contents[60], 0.73, days=90)
    chatter = hit(81, "user", contents[80], 0.52, days=20)
    arranged = arrange.arrange(conversation.pk, [[dentist], [chatter]], timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged] == [
        (81, "most recent", None),
        (61, "", None),
    ]


def test_facts_about_one_name_add_up_the_newest_marked_none_replaced(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2], contents[40] = "My sister is Ana.", "Ana lives in Oslo."
    contents[70] = "I drive a red Skoda."
    contents[90] = "I sold the Skoda and bought a grey Volvo."
    conversation = conversation_with(owner, contents)
    sister = hit(3, "user", contents[2], 0.5, days=90)
    oslo = Item(**{**hit(41, "user", contents[40], 0.45, days=60).__dict__, "via": "Ana"})
    arranged = arrange.arrange(conversation.pk, [[sister], [oslo]], timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged] == [
        (41, "most recent", None),
        (3, "", None),
    ]
    # A name in common (the car the newer message says was sold): both are shown.
    skoda = hit(71, "user", contents[70], 0.6, days=30)
    volvo = hit(91, "user", contents[90], 0.55, days=3)
    arranged = arrange.arrange(conversation.pk, [[skoda], [volvo]], timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged] == [
        (91, "most recent", None),
        (71, "", None),
    ]


def test_retrieved_lines_mark_where_non_adjacent_messages_meet():
    items = [hit(3, "user", "a"), hit(4, "assistant", "b"), hit(9, "user", "c")]
    assert retrieved_lines(items) == ["#3 User: a", "#4 Assistant: b", "…", "#9 User: c"]


def test_times_read_as_a_person_says_them():
    now = timezone.now()
    assert ago(now - timedelta(days=3, hours=2), now) == "3 days ago"
    assert ago(now - timedelta(minutes=1), now) == "1 minute ago"
    assert ago(now - timedelta(days=400), now) == "1 year ago"
    assert ago(now, now) == "just now"


def test_names_in_a_hit_are_found_but_not_those_the_question_says():
    texts = ["My sister is Ana.", "Ana's birthday is 3 May.", "Ask Marek on Tuesday."]
    assert entities.names(texts, exclude="When is my sister's birthday?") == ["Ana", "Marek"]
    assert entities.names(texts, exclude="Is Ana coming?") == ["Marek"]


def test_a_chat_finds_facts_about_a_name_its_first_hit_gives(chat, runtime, owner_key):  # noqa: F811
    facts = {101: "My sister is called Ana.", 1501: "Ana lives in Oslo these days."}
    long_conversation(owner_key, 3000, facts=facts)
    vectors.embed_pending(conversation_id=Message.objects.get(seq=101).conversation_id)
    runtime.script = lambda prompt, body: "Oslo." if facts[1501] in prompt else "No idea."
    data = chat("Which town is my sister living in?")
    assert reply_of(data["job_id"]) == "Oslo."
    # Found through the name: the first search follows it (the message says so), or the
    # agent's second round searches for it.
    searches = Step.objects.filter(job_id=data["job_id"], name="search_history")
    through_ana = [
        message
        for step in searches
        for message in step.output["result"]["messages"]
        if message["content"] == facts[1501]
        and (message.get("via") == "Ana" or step.input["arguments"]["query"] == "Ana")
    ]
    assert through_ana


def test_a_question_in_other_words_gets_the_current_message_quoted(chat, runtime, owner_key):  # noqa: F811
    facts = {
        101: "My chiropractor is Dr. Pennington.",
        1501: "Dr. Pennington moved practices, so Anouk Verhoeven sees to my spine now.",
    }
    long_conversation(owner_key, 3000, facts=facts)
    vectors.embed_pending(conversation_id=Message.objects.get(seq=101).conversation_id)
    runtime.script = lambda prompt, body: "I see Dr. Pennington."
    data = chat("Who treats my back?")
    # The user never said "back": no retry can mend the answer (``never_said``), but the
    # message retrieval marked the most recent about it is quoted, never the older one.
    kinds = [
        s.input["kind"] for s in Step.objects.filter(job_id=data["job_id"], name="reply_borrowed")
    ]
    assert kinds == ["never_said"]
    assert reply_of(data["job_id"]) == f"I don't know. You told me: “{facts[1501]}”"


def test_a_summary_is_cleaned_like_a_reply():
    text = 'The user parks on level 3.\nUser: thanks\n{"tool": "calculator", "arguments": {}}'
    assert clean_summary(text, limit=100) == "The user parks on level 3."


def test_a_clipped_message_names_read_history_only_when_the_prompt_offers_it():
    item = Item(seq=5, role="user", content="word " * 300, tokens=300)
    assert "read_history" in clip(item, 80, numbered=False).content
    assert "read_history" not in clip(item, 80, numbered=False, tool=False).content


def test_the_fact_a_paraphrase_finds_reaches_the_prompt_with_its_time(chat, runtime, owner_key):  # noqa: F811
    conversation = long_conversation(owner_key, 3000, facts=FACTS)
    vectors.embed_pending(conversation_id=conversation.pk)
    runtime.script = lambda prompt, body: "C-42." if FACTS[3] in prompt else "No idea."
    data = chat("Where did I leave my vehicle?")
    assert reply_of(data["job_id"]) == "C-42."
    assert re.search(rf"#3 \(\w+ \w+( ago)?\) User: {re.escape(FACTS[3])}", runtime.prompts()[0])


def test_the_admin_shows_how_fast_the_catch_up_goes(owner_key, staff_client):  # noqa: F811
    from django.urls import reverse

    from conversations.models import EmbeddingCatchUp
    from gateway import embeddings

    conversation = conversation_of_facts(owner_key, 10)
    vectors.embed_pending(conversation_id=conversation.pk, limit=4)
    EmbeddingCatchUp.objects.create(model=embeddings.model_id(), below_id=0)
    from django.contrib.admin.utils import quote

    progress = vectors.catch_up_progress(embeddings.model_id())
    assert progress == {"per_minute": 0.4, "waiting": 6}
    model = embeddings.model_id()
    page = staff_client.get(
        reverse("admin:conversations_embeddingcatchup_change", args=[quote(model)])
    )
    assert page.status_code == 200
    assert b"vectors stored per minute" in page.content.lower()


def test_a_long_partner_comes_clipped(owner):  # noqa: F811
    paste = "Here is the log: " + "line " * 400
    conversation = conversation_with(owner, ["Show me the log.", paste])
    question = hit(1, "user", "Show me the log.", 0.6)
    [_, partner] = arrange.arrange(conversation.pk, [[question]], timezone.now())
    assert (
        partner.clipped_from and partner.tokens <= arrange.PARTNER_TOKENS + arrange.CLIP_MARK_ROOM
    )


def test_a_replaced_hits_partner_stays_unless_it_says_the_same_again(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[0], contents[1] = "Book a dentist check-up for me.", "Booked with Dr. Ambrose at 11."
    contents[40], contents[41] = "I live in Lyon.", "Got it, you live in Lyon now."
    contents[60], contents[80] = "Ok. (the dentist appointment)", "I moved to Porto last month."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    # A later chat line replaces the request; the reply that stated the fact stays (the
    # chat line's own reply, which says nothing of it, is not brought).
    request = hit(1, "user", contents[0], 0.64, days=90)
    chatter = hit(61, "user", contents[60], 0.6, days=20)
    arranged = arrange.arrange(conversation.pk, [[request], [chatter]], timezone.now())
    assert {item.seq: item.replaced_by for item in arranged} == {61: None, 1: 61, 2: None}
    # A reply that says the stale value again goes with it.
    lyon = hit(41, "user", contents[40], 0.5, days=60)
    porto = hit(81, "user", contents[80], 0.45, days=10)
    arranged = arrange.arrange(conversation.pk, [[lyon], [porto]], timezone.now())
    assert {item.seq: item.replaced_by for item in arranged} == {81: None, 41: 81, 42: 81}


def test_a_newer_hit_as_relevant_as_one_about_the_thing_is_about_it_too_and_read_last(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[0] = "My favourite restaurant is Bistro Lumière."
    contents[4] = "Bistro Lumière is still my favourite place to eat."
    contents[62] = "Honestly, Nakamura Ramen has become my favourite restaurant."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    first = hit(1, "user", contents[0], 0.61, days=90)
    again = hit(5, "user", contents[4], 0.43, days=80)
    newest = hit(63, "user", contents[62], 0.47, days=30)
    arranged = arrange.arrange(conversation.pk, [[first], [newest], [again]], timezone.now())
    assert {item.seq: (item.mark, item.replaced_by) for item in arranged if item.seq % 2} == {
        63: ("most recent", None),
        1: ("", 63),
        5: ("", 63),
    }
    agent = profile(prompt_style=PromptStyle.TRANSCRIPT, tools=[])
    context = build(conversation, agent, "Which restaurant do I like best?", retrieved=arranged)
    block = transcript(context).split("Earlier in the conversation:\n")[1].split("\n\n")[0]
    # The current value is the line read last; its reply, which says nothing of it, is
    # not shown (``test_memory_updates``).
    assert block.splitlines()[-1] == "#63 (1 month ago, most recent) User: " + contents[62]
    assert contents[63] not in block
