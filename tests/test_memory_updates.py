"""Updates win for a small model: the value an update changed leaves the prompt even when
it reads far more like the question, and a reply that says nothing of the update is not
read just before it."""

import pytest
from django.utils import timezone

from agents.models import PromptStyle
from conversations import arrange, linked, outdated, vectors
from conversations.history import Item
from conversations.render import transcript
from conversations.retrieval import find_messages
from tests.test_borrowing import context, notes, styled, temperatures
from tests.test_context import build, conversation_with, owner, profile  # noqa: F401
from tests.test_memory_current import hit
from tests.test_memory_links import filler
from tests.test_prompt_styles import chat, reply  # noqa: F401

pytestmark = pytest.mark.django_db


def updating(item: Item, seq: int) -> Item:
    """``item`` as retrieval gives a message that may say what changed of message ``seq``."""
    return Item(**{**item.__dict__, "updates": seq})


def block_of(conversation, arranged, question: str) -> list[str]:
    agent = profile(prompt_style=PromptStyle.TRANSCRIPT, tools=[])
    context = build(conversation, agent, question, retrieved=arranged)
    block = transcript(context).split("Earlier in the conversation:\n")[1]
    return block.split("\n\n")[0].splitlines()


def test_the_value_an_update_changed_leaves_even_when_it_reads_more_like_the_question(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2], contents[40] = "My salary is 48,000 a year.", "My salary went up to 55,000."
    conversation = conversation_with(owner, contents)
    old = hit(3, "user", contents[2], 0.67, days=90)
    new = updating(hit(41, "user", contents[40], 0.41, days=20), 3)
    arranged = arrange.arrange(conversation.pk, [[old], [new]], timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged] == [
        (41, "most recent", None),
        (3, "", 41),
    ]
    assert block_of(conversation, arranged, "How much do I earn per year?") == [
        "#41 (2 weeks ago, most recent) User: My salary went up to 55,000.",
    ]


def test_a_name_in_common_keeps_the_older_fact_unless_the_update_tells_a_change(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2], contents[40] = "My sister is Ana.", "Ana lives in Oslo."
    contents[70], contents[90] = "I drive a red Skoda.", "I sold the Skoda and bought a grey Volvo."
    conversation = conversation_with(owner, contents)
    sister = hit(3, "user", contents[2], 0.5, days=90)
    oslo = updating(hit(41, "user", contents[40], 0.45, days=60), 3)
    arranged = arrange.arrange(conversation.pk, [[sister], [oslo]], timezone.now(), paired=0)
    assert {item.seq: item.replaced_by for item in arranged} == {41: None, 3: None}
    skoda = hit(71, "user", contents[70], 0.64, days=30)
    volvo = updating(hit(91, "user", contents[90], 0.45, days=3), 71)
    arranged = arrange.arrange(conversation.pk, [[skoda], [volvo]], timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged] == [
        (91, "most recent", None),
        (71, "", 91),
    ]


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        ("Could you remind Kira about the printer? I think it was cleaned on Monday.", False),
        ("Got it, you live in Porto now.", True),
    ],
)
def test_the_updates_reply_is_read_before_it_only_when_it_speaks_of_it(owner, reply, shown):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2], contents[40] = "I live in Lyon.", "I moved to Porto last month."
    contents[41] = reply
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    lyon = hit(3, "user", contents[2], 0.5, days=90)
    porto = updating(hit(41, "user", contents[40], 0.42, days=20), 3)
    arranged = arrange.arrange(conversation.pk, [[lyon], [porto]], timezone.now())
    block = block_of(conversation, arranged, "Where do I live now?")
    assert block[-1] == "#41 (2 weeks ago, most recent) User: I moved to Porto last month."
    assert any(reply in line for line in block) is shown
    assert not any("Lyon" in line for line in block)


def test_an_outdated_replys_old_value_is_what_came_before_the_change_and_holds_it():
    said = context(
        "Where do I live now?",
        "I live in Lyon.", "Got it, you live in Lyon.",
        "The weather is nice.", "Lovely.",
        "I moved to Porto last month.", "That sounds nice.",
        "Lyon was fun though.", "Sure.",
    )  # fmt: skip
    assert outdated.stale_seqs("You live in Lyon.", said, ("porto",)) == {1, 2}
    shown = outdated.without_stale(said, {1, 2})
    assert [item.seq for item in shown.recent] == [3, 4, 5, 6, 7, 8]
    assert shown.used == said.used - said.recent[0].cost() - said.recent[1].cost()
    assert outdated.without_stale(said, {42}) is said
    # Nothing names the newer value: nothing is known to be stale.
    assert outdated.stale_seqs("You live in Lyon.", said, ("madrid",)) == set()


def test_an_update_that_names_the_old_value_again_stays_beside_what_it_changed():
    said = context(
        "What car do I drive?",
        "I drive a red Skoda.", "Nice car.",
        "I sold the Skoda and bought a grey Volvo.", "Enjoy it.",
    )  # fmt: skip
    assert outdated.stale_seqs("A red Skoda.", said, ("volvo",)) == {1, 2}


def piano_asked(chat, runtime, script, profile: str = "default"):  # noqa: F811
    """Asks who tunes the piano after the tuner changed; ``script`` answers the question."""
    runtime.script = lambda prompt, body: "Nice."
    for said in ("Our piano tuner is Leopold.", "Leopold retired, so Beatrix tunes our piano now."):
        chat(said, profile=profile)
    runtime.reset()
    runtime.script = script
    return chat("Who tunes our piano?", profile=profile)


@pytest.mark.parametrize("style", ["transcript", "chat"])
def test_an_outdated_replys_retry_is_shown_the_change_alone(chat, runtime, style):  # noqa: F811
    script = lambda prompt, body: "Leopold." if "is Leopold" in str(body) else "Beatrix."  # noqa: E731
    job = piano_asked(chat, runtime, script, styled(style))
    assert reply(job) == "Beatrix."
    [note] = notes(job, "reply_borrowed")
    assert (note["kind"], note["words"]) == ("outdated", ["beatrix"])
    assert temperatures(runtime) == [0, 0]  # greedy: the retry's prompt is another
    assert "is Leopold" not in str(runtime.generate_requests()[-1].body)


def test_the_old_value_again_without_its_lines_is_still_outdated(chat, runtime):  # noqa: F811
    job = piano_asked(chat, runtime, lambda prompt, body: "Leopold.")
    # The update, quoted beside it (``conversations.quoting``); never the old value.
    assert (
        reply(job)
        == "I don't know. You told me: “Leopold retired, so Beatrix tunes our piano now.”"
    )
    assert [n["kind"] for n in notes(job, "reply_borrowed")] == ["outdated"] * 3
    assert temperatures(runtime) == [0, 0, 0.7]


def test_a_line_about_something_else_is_not_what_changed_the_best_hit_beside_an_update(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[2] = "My physiotherapist is Dr. Okafor."
    contents[40] = "Dr. Okafor retired, so Mr. Lindqvist treats my shoulder now."
    contents[70] = "My cousin Beatrix runs a yoga studio in Bristol."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    old = hit(3, "user", contents[2], 0.40, days=90)
    new = updating(hit(41, "user", contents[40], 0.30, days=40), 3)
    # Retrieval found the cousin's line too: it stood out among those said after the best.
    stray = updating(hit(71, "user", contents[70], 0.21, days=20), 3)
    groups = [[old], [new], [stray]]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert {item.seq: (item.mark, item.replaced_by) for item in arranged} == {
        41: ("most recent", None),
        3: ("", 41),
        71: ("", None),
    }
    assert block_of(conversation, arranged, "Who looks after my shoulder?")[-1] == (
        "#41 (1 month ago, most recent) User: " + contents[40]
    )


def test_an_older_message_of_the_same_thing_far_behind_the_best_stays_and_the_best_is_marked(
    owner,  # noqa: F811
):
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[10] = "Our window cleaner Tadeusz comes on Mondays."
    contents[60] = "Tadeusz comes on Fridays now."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    question = "Which day does Tadeusz come?"
    found = find_messages(conversation_id=conversation.pk, query=question, limit=10)
    # 0.19 less similar to the question than the best, but 0.71 close to it in meaning.
    assert [row["seq"] for row in found.rows][:2] == [61, 11]
    groups = [[Item.from_row(row)] for row in found.rows]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert [(item.seq, item.mark) for item in arranged][:2] == [(61, "most recent"), (11, "")]


def test_a_later_line_that_tells_a_change_close_to_the_fact_is_its_update(owner):  # noqa: F811
    contents = [f"filler {n} " * 5 for n in range(100)]
    contents[10] = "Our beach hut at Southwold is number 23."
    # 0.28 less like the question than the fact: only its telling a change says it is one.
    contents[60] = "The council moved us to beach hut 61 at the far end of the promenade."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(
        conversation_id=conversation.pk, query="Which beach hut number is ours?", limit=10
    )
    rows = {row["seq"]: row for row in found.rows}
    assert rows[61].get("updates") == 11
    groups = [[Item.from_row(row)] for row in found.rows]
    arranged = arrange.arrange(conversation.pk, groups, timezone.now(), paired=0)
    assert [(item.seq, item.mark, item.replaced_by) for item in arranged][:2] == [
        (61, "most recent", None),
        (11, "", 61),
    ]


@pytest.mark.parametrize(
    ("fact", "change", "updates"),
    [
        ("Our beach hut at Southwold is number 23.", "The council moved us to beach hut 61.", True),
        # Facts about one person add up: this change is of something else of theirs.
        ("Casimir repairs old motorbikes.", "Casimir moved to Gdansk last year.", False),
    ],
)
def test_a_told_change_may_update_a_fact_unless_of_one_named(owner, fact, change, updates):  # noqa: F811
    contents = filler(120)
    contents[10], contents[70] = fact, change
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    hit = {"seq": 11, "role": "user", "content": fact, "similarity": 0.8}
    # Far less like the question than the fact: only its telling a change may make it one.
    later = {"seq": 71, "role": "user", "content": change, "similarity": 0.3}
    found = linked.newer_neighbours(conversation.pk, [hit], [later])
    assert [row.get("updates") for row in found] == ([11] if updates else [])
