"""The runtime client's synchronous entry (the worker's): a streamed model call hands its
deltas to ``on_delta`` in the calling thread as they arrive, ``should_stop`` ends it, and no
thread is started per call. Against the loopback runtime."""

import threading

import pytest

from gateway import runtime as runtime_client
from gateway import services
from gateway.models import UsageRecord
from tests.factories import wait_for
from tests.runtime_server import Reply

TRANSACTIONAL = pytest.mark.django_db(transaction=True)


@TRANSACTIONAL
def test_a_model_call_gives_its_deltas_in_order_in_the_calling_thread(runtime, make_key):
    runtime.script = lambda prompt, body: Reply(text="one two three four", chunk_delay=0.01)
    api_key, _ = make_key(scopes=("model", "agent"))
    deltas: list[tuple[str, int]] = []
    result = services.model_call(
        api_key=api_key,
        model="test-model",
        prompt="count",
        origin=UsageRecord.Origin.AGENT,
        on_delta=lambda text: deltas.append((text, threading.get_ident())),
    )
    assert [text for text, _ in deltas] == ["one", " two", " three", " four"]
    assert "".join(text for text, _ in deltas) == result.response == "one two three four"
    assert {thread for _, thread in deltas} == {threading.get_ident()}
    [usage] = UsageRecord.objects.all()
    assert (usage.status, usage.completion_tokens) == (200, 4)


@TRANSACTIONAL
def test_a_delta_arrives_before_the_answer_ends_and_a_stop_then_closes_the_call(runtime, make_key):
    words = 300  # at 0.1 s a chunk the whole answer would take 30 s
    runtime.script = lambda prompt, body: Reply(text="word " * words, chunk_delay=0.1)
    api_key, _ = make_key(scopes=("model", "agent"))
    deltas: list[str] = []
    with pytest.raises(runtime_client.GenerationCancelled):
        services.model_call(
            api_key=api_key,
            model="test-model",
            prompt="talk",
            origin=UsageRecord.Origin.AGENT,
            on_delta=deltas.append,
            should_stop=lambda: bool(deltas),  # stop once the first delta came
        )
    assert 1 <= len(deltas) < words
    wait_for(lambda: runtime.closed_early == 1, what="the runtime to see the hang-up")
    [usage] = UsageRecord.objects.all()
    assert (usage.status, usage.error) == (499, "cancelled")


@pytest.mark.django_db
def test_a_streamed_call_starts_no_thread_of_its_own(runtime):
    runtime.script = lambda prompt, body: Reply(text="a b c", chunk_delay=0.01)
    runtime_client.generate("test-model", "warm", should_stop=lambda: False)  # the loop exists
    before = threading.active_count()
    during: list[int] = []
    runtime_client.generate(
        "test-model",
        "hi",
        should_stop=lambda: False,
        on_delta=lambda text: during.append(threading.active_count()),
    )
    assert during and set(during) == {before}


@pytest.mark.django_db
def test_a_failure_in_on_delta_ends_the_call_and_reaches_the_caller(runtime):
    runtime.script = lambda prompt, body: Reply(text="word " * 300, chunk_delay=0.1)

    def refuse(text: str) -> None:
        raise LookupError("the consumer failed")

    with pytest.raises(LookupError):
        runtime_client.generate("test-model", "hi", on_delta=refuse)
    wait_for(lambda: runtime.closed_early == 1, what="the runtime to see the hang-up")
