"""The vectors a process keeps of a conversation (``conversations.vector_cache``): brought
up to date with the database whatever changed, reading only what it lacks."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import services, vector_cache, vectors
from conversations.models import Message, MessageEmbedding
from conversations.retrieval import find_messages
from gateway import embeddings
from tests.test_chat import long_conversation, owner_key  # noqa: F401

pytestmark = pytest.mark.django_db
DIMENSION = 384  # the local embedder's


def kept(conversation):
    """The kept vectors of the conversation, brought up to date."""
    return vector_cache.CACHE.vectors(conversation.pk, embeddings.model_id(), DIMENSION)


def stored(conversation) -> list[int]:
    return sorted(
        MessageEmbedding.objects.filter(conversation=conversation).values_list("seq", flat=True)
    )


def vector_reads(queries) -> list[str]:
    return [q["sql"] for q in queries if "vector" in q["sql"] and "SELECT" in q["sql"].upper()]


def test_kept_vectors_follow_deleted_and_late_embedded_messages_reading_only_those(owner_key):  # noqa: F811
    vector_cache.CACHE.clear()
    conversation = long_conversation(owner_key, 30)
    vectors.messages_embed_at(conversation_id=conversation.pk, seqs=list(range(1, 31, 2)))
    before = kept(conversation)
    assert before.seqs[: before.size].tolist() == stored(conversation)
    # Messages deleted and older ones embedded late (the catch-up, or on the spot).
    Message.objects.filter(conversation=conversation, seq__in=[3, 5]).delete()
    vectors.messages_embed_at(conversation_id=conversation.pk, seqs=[2, 4])
    with CaptureQueriesContext(connection) as queries:
        after = kept(conversation)
    assert after.seqs[: after.size].tolist() == stored(conversation)
    (read,) = vector_reads(queries)  # the two added rows only: not the whole conversation
    assert " IN (" in read.upper()
    # The same vectors as a whole read gives, scored alike.
    vector_cache.CACHE.clear()
    whole = kept(conversation)
    query = whole.rows[0].astype(np.float32)
    for seqs_scores in zip(
        after.similarities(query, 100), whole.similarities(query, 100), strict=True
    ):
        assert np.allclose(*seqs_scores)
    assert after.fingerprint == whole.fingerprint
    # Unchanged since: nothing is read but the fingerprint.
    with CaptureQueriesContext(connection) as queries:
        assert kept(conversation) is whole
    assert not vector_reads(queries)
    # The reader that held the old copy still sees what it read.
    assert before.seqs[: before.size].tolist() == list(range(1, 31, 2))


def fingerprints(queries) -> int:
    return sum("sum(seq)" in q["sql"] for q in queries)


def test_a_search_brings_the_vectors_up_to_date_once_and_again_after_it_stores_some(owner_key):  # noqa: F811
    vector_cache.CACHE.clear()
    facts = {4: "My sister Zofia plays the cello.", 9: "Zofia lives in Gdansk."}
    conversation = long_conversation(owner_key, 30, facts)
    vectors.messages_embed_at(conversation_id=conversation.pk, seqs=list(range(1, 31)))
    with CaptureQueriesContext(connection) as queries:  # the question, its subject, the hits
        find_messages(conversation_id=conversation.pk, query="Where does my sister live?", limit=5)
    assert fingerprints(queries) == 1
    Message.objects.filter(conversation=conversation, seq=30).delete()
    with vectors.one_reading():
        before = kept(conversation)
        assert kept(conversation) is before
        services.messages_import(conversation=conversation, messages=[("user", "Late.")])
        vectors.messages_embed_at(conversation_id=conversation.pk, seqs=[31])
        after = kept(conversation)
    assert after.seqs[: after.size].tolist() == [*range(1, 30), 31]


def test_several_queries_are_scored_exactly_as_each_alone():
    rng = np.random.default_rng(7)
    kept = vector_cache.Vectors(DIMENSION)
    rows = rng.integers(-127, 128, (2 * vector_cache.BLOCK + 5, DIMENSION), dtype=np.int8)
    kept.append(
        [(seq, DIMENSION, row.tobytes()) for seq, row in enumerate(rows, start=1)],
        vector_cache.Fingerprint(),
    )
    queries = rng.standard_normal((3, DIMENSION)).astype(np.float32)
    seqs, each = kept.similarities(queries, 2000)
    assert each.shape == (3, 1999)
    for query, scores in zip(queries, each, strict=True):
        alone_seqs, alone = kept.similarities(query, 2000)
        assert np.array_equal(seqs, alone_seqs) and np.array_equal(scores, alone)
