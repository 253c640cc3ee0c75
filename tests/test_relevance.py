"""The relevance floor (``conversations.relevance``): as strict in a short history as in a
long one, a lead that counts, and a lone best match kept when nothing else is."""

import numpy as np

from conversations import relevance


def ordinary(count: int, seed: int = 7) -> np.ndarray:
    """Similarities of ``count`` ordinary messages: mean 0.1, spread 0.07."""
    return np.random.default_rng(seed).normal(0.1, 0.07, count).astype(np.float32)


def floor(background: float, **extra) -> relevance.Floor:
    return relevance.Floor(background=background, query_terms=["brother", "name"], worded=set(),
                           related={}, on=True, **extra)  # fmt: skip


def test_the_background_of_a_short_history_is_as_high_as_that_of_a_long_one():
    short, long = ordinary(160), ordinary(2000)
    # The 10th best of 160 ordinary messages is about 1.5 spreads above their mean, of
    # 2,000 about 2.6: the spread keeps a short history's floor where a long one's is.
    assert relevance.ranked_background(short) < relevance.ranked_background(long) - 0.05
    assert abs(relevance.background(short, 160) - relevance.background(long, 2000)) < 0.03


def test_the_spread_counts_only_when_most_messages_have_a_vector():
    found_by_words = ordinary(40)  # vectors made on the spot for hits by words
    assert relevance.background(found_by_words, 2000) == relevance.ranked_background(found_by_words)


def test_a_message_far_ahead_of_all_others_needs_less_above_the_background():
    similarity = np.append(ordinary(160), np.float32(0.36))
    best, lead = relevance.standout(similarity)
    assert best == np.float32(0.36) and lead > 0.1
    row = {"similarity": 0.36, "content": "The wifi password is tulip-9981."}
    kept = relevance.kept([1], {1: row}, {1: 1.0}, {1: 0.36}, floor(0.31, standout=best, lead=lead),
                          5)  # fmt: skip
    assert kept[0] and not kept[1]
    behind = relevance.kept([1], {1: row}, {1: 1.0}, {1: 0.36}, floor(0.31, standout=best,
                            lead=0.04), 5)  # fmt: skip
    assert behind[0] == [] and "below the floor" in behind[1][0]["reason"]


def test_the_first_of_the_ranking_is_kept_alone_only_when_it_is_the_best_by_meaning_too():
    similarity_of = {5: 0.45, 9: 0.47}
    assert relevance.lone([5, 9], 5, similarity_of, floor(0.4)) == 5
    assert relevance.lone([5, 9], 9, similarity_of, floor(0.4)) is None  # best by meaning: 9
    assert relevance.lone([5, 9], 5, similarity_of, floor(0.46)) is None  # the background
    assert relevance.lone([5], 5, {5: 0.40}, floor(0.2)) is None  # below LONE_FLOOR
    off = relevance.Floor(background=0.2, query_terms=[], worded=set(), related={}, on=False)
    assert relevance.lone([5], 5, similarity_of, off) is None
