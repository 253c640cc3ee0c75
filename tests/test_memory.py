"""Agent memory by meaning: the embedding client and its backends, stored vectors,
hybrid search, the catch-up, and the chat agent finding a paraphrased fact."""

import io
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Step
from conversations import services, vectors
from conversations.models import Conversation, EmbeddingCatchUp, Message, MessageEmbedding
from conversations.retrieval import find_messages
from conversations.search import keywords, search_messages, search_rare
from gateway import embeddings, local_embedder, routing
from tests.runtime_server import EMBEDDING_DIMENSION, Reply
from tests.test_chat import chat, long_conversation, owner_key, reply_of  # noqa: F401

pytestmark = pytest.mark.django_db

FACTS = {
    3: "I parked the car on level 3, spot C-42.",
    9: "My sister's birthday is on the 14th of March.",
    15: "The wifi password at home is tulip-9981.",
    21: "I'm allergic to penicillin, so never suggest it.",
    27: "We adopted a cat called Miso last spring.",
    33: "I keep the spare key under the blue flowerpot by the door.",
}
PARAPHRASES = {
    3: "Where did I leave my vehicle?",
    9: "When is my sibling's birthday?",
    15: "What's the internet passphrase?",
    21: "Which medicine can't I take?",
    27: "What is the name of our pet?",
    33: "Where is the extra house key hidden?",
}


@pytest.fixture
def runtime_embedder(runtime, settings):
    """The loopback runtime's embedding endpoint as the backend, for ``test-model``."""
    settings.EMBEDDING_BACKEND = "runtime"
    settings.EMBEDDING_MODEL = "test-model"
    embeddings.forget()
    yield runtime
    embeddings.forget()


def conversation_of_facts(owner_key, size: int = 60):  # noqa: F811
    return long_conversation(owner_key, size, facts=FACTS)


# --- The embedding client -------------------------------------------------------------------


def test_the_local_embedder_gives_normalised_vectors_that_match_by_meaning(settings):
    assert embeddings.backend() == "local"
    assert embeddings.model_id() == f"local:{local_embedder.MODEL_NAME}"
    facts = embeddings.embed(list(FACTS.values()))
    questions = embeddings.embed(list(PARAPHRASES.values()))
    assert facts.shape == (6, 384)
    assert np.allclose(np.linalg.norm(facts, axis=1), 1.0, atol=1e-4)
    assert list((questions @ facts.T).argmax(axis=1)) == list(range(6))


@pytest.mark.parametrize(("api", "path"), [("ollama", "/api/embed"), ("openai", "/v1/embeddings")])
def test_the_runtime_embedder_calls_the_runtimes_endpoint(runtime_embedder, settings, api, path):
    settings.MODEL_RUNTIME_API = api
    routing.clear_cache()
    vectors_ = embeddings.embed(["red bicycle", "blue car", "red bicycle"])
    assert vectors_.shape == (3, EMBEDDING_DIMENSION)
    assert np.allclose(vectors_[0], vectors_[2])
    [request] = [r for r in runtime_embedder.requests if r.path == path]
    assert request.body["model"] == "test-model"  # texts are sent shortest first
    assert request.body["input"] == ["blue car", "red bicycle", "red bicycle"]
    assert embeddings.model_id() == "runtime:test-model"


def test_a_failing_runtime_embedder_raises_unavailable(runtime_embedder):
    runtime_embedder.embed_error = Reply(status=500, error="embedding model crashed")
    with pytest.raises(embeddings.EmbeddingUnavailable, match="runtime_error"):
        embeddings.embed(["anything"])


def test_the_none_backend_embeds_nothing(settings):
    settings.EMBEDDING_BACKEND = "none"
    assert embeddings.model_id() is None
    with pytest.raises(embeddings.EmbeddingUnavailable):
        embeddings.embed(["x"])


# --- Stored vectors -----------------------------------------------------------------------------


def test_vectors_are_stored_compactly_with_their_model_and_dimension(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 10)
    assert vectors.embed_pending(conversation_id=conversation.pk) == 10
    row = MessageEmbedding.objects.get(message__conversation=conversation, seq=3)
    assert (row.model, row.dimension, len(bytes(row.vector))) == (embeddings.model_id(), 384, 384)
    assert row.seq == 3 and row.conversation_id == conversation.pk
    assert vectors.pending(conversation_id=conversation.pk, limit=10) == []


def test_vectors_made_elsewhere_are_stored_as_the_service_would_store_them(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 10)
    stored = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    made = embeddings.embed([m.content for m in stored])
    assert vectors.message_vectors_store(messages=stored, vectors=made) == 10
    assert vectors.pending(conversation_id=conversation.pk, limit=10) == []
    row = MessageEmbedding.objects.get(message=stored[2])
    assert (row.model, row.seq, row.conversation_id) == (embeddings.model_id(), 3, conversation.pk)
    assert bytes(row.vector) == vectors.quantize(made[2])


def test_the_catch_up_looks_only_past_the_messages_it_found_embedded(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 10)
    Message.objects.filter(conversation=conversation).update(
        created_at=timezone.now() - vectors.CATCH_UP_GRACE - timedelta(seconds=1)
    )
    newest = Message.objects.filter(conversation=conversation).latest("id").id
    assert vectors.embed_pending() == 10
    mark = EmbeddingCatchUp.objects.get(model=embeddings.model_id())
    assert mark.below_id == newest + 1
    services.messages_import(conversation=conversation, messages=[("user", "a"), ("user", "b")])
    with CaptureQueriesContext(connection) as queries:
        found = vectors.pending(limit=10)
    assert found == [newest + 1, newest + 2]  # oldest first
    assert any(f'"id" >= {newest + 1}' in q["sql"] for q in queries.captured_queries)
    # Stored just now: embedded, but the mark stays before them until the grace is over.
    assert vectors.embed_pending() == 2
    assert EmbeddingCatchUp.objects.get(model=embeddings.model_id()).below_id == newest + 1
    assert vectors.pending(limit=10) == []


def test_deleting_a_message_or_a_conversation_deletes_its_vectors(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 10)
    vectors.embed_pending(conversation_id=conversation.pk)
    Message.objects.filter(conversation=conversation, seq=3).delete()
    assert MessageEmbedding.objects.filter(conversation=conversation).count() == 9
    Conversation.objects.filter(pk=conversation.pk).delete()
    assert not MessageEmbedding.objects.exists()


def test_a_model_change_re_embeds_and_never_mixes_models(runtime, settings, owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 40)
    vectors.embed_pending(conversation_id=conversation.pk)
    local_model = embeddings.model_id()
    settings.EMBEDDING_BACKEND, settings.EMBEDDING_MODEL = "runtime", "test-model"
    # Nothing of the new model yet: semantic search finds nothing rather than compare
    # a runtime vector with local ones.
    found = find_messages(
        conversation_id=conversation.pk, query="spare key", limit=5, mode="semantic"
    )
    assert (found.mode, found.rows) == ("semantic", [])
    assert len(vectors.pending(conversation_id=conversation.pk, limit=100)) == 40
    call_command("embed_history", conversation=conversation.pk, stdout=io.StringIO())
    models = set(MessageEmbedding.objects.values_list("model", "dimension"))
    assert models == {("runtime:test-model", EMBEDDING_DIMENSION)}
    assert local_model not in {m for m, _ in models}
    found = find_messages(
        conversation_id=conversation.pk, query=FACTS[33], limit=1, mode="semantic"
    )
    assert found.rows[0]["seq"] == 33


def test_embed_history_reports_what_it_embedded(owner_key, capsys):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 12)
    call_command("embed_history")
    out = capsys.readouterr().out
    assert "12 messages embedded" in out and embeddings.model_id() in out
    call_command("embed_history", conversation=conversation.pk)
    assert "0 messages embedded" in capsys.readouterr().out


# --- The vectors a process keeps between turns -------------------------------------------------


def semantic_seqs(conversation, question: str, limit: int = 3) -> list[int]:
    """The best by meaning, relevant or not (these tests are about the kept vectors)."""
    found = find_messages(
        conversation_id=conversation.pk, query=question, limit=limit, mode="semantic", floor=False
    )
    return [row["seq"] for row in found.rows]


def embed_seqs(conversation, *seqs: int) -> None:
    ids = Message.objects.filter(conversation=conversation, seq__in=seqs).values_list(
        "id", flat=True
    )
    vectors.messages_embed(message_ids=ids)


def test_a_new_message_is_found_right_after_it_is_embedded(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 40)
    vectors.embed_pending(conversation_id=conversation.pk)
    question = "Where is my boat moored?"
    assert semantic_seqs(conversation, question)  # this process now keeps the 40 vectors
    services.messages_import(
        conversation=conversation, messages=[("user", "The sailboat is tied up at pier 7.")]
    )
    embed_seqs(conversation, 41)
    assert semantic_seqs(conversation, question)[0] == 41


def test_an_older_message_embedded_late_is_found(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 40)
    vectors.embed_pending(conversation_id=conversation.pk)
    MessageEmbedding.objects.filter(conversation=conversation, seq=33).delete()
    assert 33 not in semantic_seqs(conversation, PARAPHRASES[33])
    embed_seqs(conversation, 33)  # the catch-up, after newer messages had their vectors
    assert semantic_seqs(conversation, PARAPHRASES[33])[0] == 33


def test_a_deleted_message_is_never_returned(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 40)
    vectors.embed_pending(conversation_id=conversation.pk)
    MessageEmbedding.objects.filter(conversation=conversation, seq=9).delete()
    assert semantic_seqs(conversation, PARAPHRASES[3])[0] == 3
    # One message deleted and another embedded late: as many vectors as before.
    Message.objects.filter(conversation=conversation, seq=3).delete()
    embed_seqs(conversation, 9)
    for mode in ("semantic", "hybrid"):
        found = find_messages(
            conversation_id=conversation.pk, query=PARAPHRASES[3], limit=40, mode=mode
        )
        assert 3 not in [row["seq"] for row in found.rows]
    assert semantic_seqs(conversation, PARAPHRASES[9])[0] == 9


def test_a_search_reads_only_the_vectors_stored_since_the_last_one(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key, 40)
    vectors.embed_pending(conversation_id=conversation.pk)
    semantic_seqs(conversation, PARAPHRASES[3])
    with CaptureQueriesContext(connection) as unchanged:
        semantic_seqs(conversation, PARAPHRASES[3])
    assert not [q for q in unchanged.captured_queries if "vector FROM" in q["sql"]]
    services.messages_import(conversation=conversation, messages=[("user", "One more.")])
    embed_seqs(conversation, 41)
    with CaptureQueriesContext(connection) as appended:
        semantic_seqs(conversation, PARAPHRASES[3])
    [read] = [q for q in appended.captured_queries if "vector FROM" in q["sql"]]
    assert "seq > 40" in read["sql"]


def test_a_name_that_many_messages_have_is_found_without_ranking_them(owner_key):  # noqa: F811
    facts = {4: "Zofia plays the cello.", 9: "Zofia lives in Gdansk."}
    conversation = long_conversation(owner_key, 30, facts)
    rare = search_rare(conversation_id=conversation.pk, query="Zofia", limit=6)
    assert rare == search_messages(conversation_id=conversation.pk, query="Zofia", limit=6)
    assert [row["seq"] for row in rare] == [9, 4]
    with CaptureQueriesContext(connection) as queries:  # six messages are about the weather
        common = search_rare(conversation_id=conversation.pk, query="weather", limit=3)
    weather = {
        row["seq"]
        for row in search_messages(conversation_id=conversation.pk, query="weather", limit=30)
    }
    assert len(common) == 3 and all(
        row["seq"] in weather and row["score"] is None for row in common
    )
    sql = [q["sql"] for q in queries.captured_queries]
    assert not [q for q in sql if "ORDER BY score" in q or "bm25" in q]  # none ranked them all
    assert not [q for q in sql if '"content"' in q]  # nor read them


# --- Hybrid search --------------------------------------------------------------------------


def test_a_paraphrase_is_found_by_meaning_but_not_by_words(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key)
    vectors.embed_pending(conversation_id=conversation.pk)
    for seq, question in PARAPHRASES.items():
        text = find_messages(conversation_id=conversation.pk, query=question, limit=3, mode="text")
        if not set(keywords(question)) & set(keywords(FACTS[seq])):
            assert seq not in [row["seq"] for row in text.rows]
        hybrid = find_messages(conversation_id=conversation.pk, query=question, limit=3)
        assert hybrid.mode == "hybrid"
        assert hybrid.rows[0]["seq"] == seq, question


def test_hybrid_search_keeps_what_full_text_finds(owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key)
    vectors.embed_pending(conversation_id=conversation.pk)
    found = find_messages(conversation_id=conversation.pk, query="tulip-9981 wifi", limit=3)
    assert found.rows[0]["seq"] == 15
    assert found.rows[0]["content"] == FACTS[15]
    assert {"score", "similarity"} <= set(found.rows[0])


def test_the_none_backend_searches_by_words_and_says_why(settings, owner_key):  # noqa: F811
    conversation = conversation_of_facts(owner_key)
    settings.EMBEDDING_BACKEND = "none"
    found = find_messages(conversation_id=conversation.pk, query="wifi password", limit=3)
    assert found.mode == "text" and "none" in found.fallback
    assert found.rows[0]["seq"] == 15


# --- The chat agent -------------------------------------------------------------------------


def test_a_paraphrased_question_brings_its_fact_into_the_prompt(chat, runtime, owner_key):  # noqa: F811
    conversation = long_conversation(owner_key, 3000, facts=FACTS)
    vectors.embed_pending(conversation_id=conversation.pk)
    runtime.script = lambda prompt, body: "Level 3, C-42." if FACTS[3] in prompt else "No idea."
    data = chat("Where did I leave my vehicle?")
    assert reply_of(data["job_id"]) == "Level 3, C-42."
    found = runtime.prompts()[0].split("Earlier in the conversation:\n")[1]
    assert "User: " + FACTS[3] in found
    search = Step.objects.filter(job_id=data["job_id"], name="search_history").first()
    assert search.output["result"]["mode"] == "hybrid"
    assert search.output["result"]["messages"][0]["seq"] == 3
    # The question and the reply were embedded by the worker, once each.
    own = MessageEmbedding.objects.filter(conversation=conversation, seq__gt=3000)
    assert sorted(own.values_list("seq", flat=True)) == [3001, 3002]


def test_a_failing_embedder_falls_back_to_full_text_and_the_chat_answers(
    chat,  # noqa: F811
    runtime_embedder,
    owner_key,  # noqa: F811
):
    conversation = long_conversation(owner_key, 300, facts=FACTS)
    runtime_embedder.embed_error = Reply(status=500, error="embedding model crashed")
    runtime_embedder.script = lambda prompt, body: "Tulip." if FACTS[15] in prompt else "?"
    data = chat("What is the wifi password?")
    assert reply_of(data["job_id"]) == "Tulip."
    search = Step.objects.filter(job_id=data["job_id"], name="search_history").first()
    assert search.output["result"]["mode"] == "text"
    assert "embedding model crashed" in search.output["result"]["fallback"]
    # The question (when the job starts) and the reply: left for the catch-up.
    skipped = Step.objects.filter(job_id=data["job_id"], name="embedding_skipped")
    assert [step.input["seqs"] for step in skipped] == [[301], [302]]
    # The embedder is back: the scheduled catch-up embeds what was missed.
    runtime_embedder.embed_error = None
    from conversations.tasks import embed_pending

    assert embed_pending() == {"embedded": 302}
    assert MessageEmbedding.objects.filter(conversation=conversation).count() == 302
