"""The relevance floor against the best match: a hit far behind it is about something else."""

from conversations import linked, relevance, retrieval, vectors
from tests.test_context import conversation_with, owner  # noqa: F401
from tests.test_memory_links import filler


def floor(**changes) -> relevance.Floor:
    values = {"background": 0.1, "query_terms": ["boss", "husband", "called"], "worded": set(),
              "related": {}, "on": True, "best": 0.6}  # fmt: skip
    return relevance.Floor(**{**values, **changes})


def keep(rows: list[dict], chosen: relevance.Floor) -> tuple[list[int], list[dict]]:
    known = {row["seq"]: row for row in rows}
    similarity = {row["seq"]: row["similarity"] for row in rows}
    scores = {seq: 1.0 / n for n, seq in enumerate(known, start=1)}
    kept, dropped = relevance.kept(list(known), known, scores, similarity, chosen, limit=10)
    return [row["seq"] for row in kept], dropped


BOSS = {"seq": 63, "role": "user", "content": "My boss is called Heather.", "similarity": 0.6}
COACH = {"seq": 33, "role": "user", "content": "My tennis coach is Ingrid.", "similarity": 0.34}


def test_a_hit_far_less_similar_than_the_best_match_is_left_out_and_the_step_says_why():
    kept, dropped = keep([BOSS, COACH], floor())
    assert kept == [63]
    assert dropped == [{"seq": 33, "reason": "similarity 0.34 more than 0.1 below the best"}]


def test_a_hit_close_behind_the_best_match_stays():
    kept, _ = keep([BOSS, {**COACH, "similarity": 0.52}], floor())
    assert kept == [63, 33]


def test_a_hit_said_after_the_best_match_and_about_the_same_stays_though_far_behind():
    later = {**COACH, "seq": 90, "content": "Heather retired; my boss is called Dana now."}
    kept, _ = keep([BOSS, later], floor(beside_best=lambda seq: seq == 90))
    assert kept == [63, 90]


def test_the_first_hit_by_words_stays_when_it_has_half_the_question_words():
    worded = {**COACH, "content": "My boss's husband is called Tom."}
    kept, _ = keep([BOSS, worded], floor(first_worded=33, worded={33}))
    assert kept == [63, 33]
    kept, _ = keep([BOSS, COACH], floor(first_worded=33, worded={33}))
    assert kept == [63]


def test_a_reply_of_the_assistant_is_not_taken_for_an_update_of_the_users_message(owner):  # noqa: F811
    contents = filler(200)
    contents[30] = "We bought the sofa at IKEA."
    contents[151] = "We bought the sofa at IKEA, you said, and the table too."
    conversation = conversation_with(owner, contents)
    vectors.embed_pending(conversation_id=conversation.pk)
    hit = {"seq": 31, "role": "user", "content": contents[30], "similarity": 0.6}
    reply = {"seq": 152, "role": "assistant", "content": contents[151], "similarity": 0.6}
    assert linked.newer_neighbours(conversation.pk, [hit], [reply]) == []
    assert linked.newer_neighbours(conversation.pk, [hit], [{**reply, "role": "user"}]) != []


def test_a_name_that_opens_a_best_hit_is_followed_after_the_names_inside_sentences():
    search = retrieval._Search("c", "What instrument does the man upstairs play?", None, "text")
    rows = [{"content": "Kwame plays the saxophone."}, {"content": "I met Ana at Kiln House."}]
    assert retrieval._names(search, rows, []) == ["Ana", "Kiln", "House", "Kwame"]
