"""Streamed calls (the agents') read the token counts the runtimes send: Ollama's final
chunk, and the usage chunk an OpenAI-compatible runtime sends when asked with
``stream_options: {"include_usage": true}``."""

import pytest

from agents import tasks
from agents.models import JobStatus
from gateway import runtime as runtime_client
from gateway.models import UsageRecord
from tests.factories import make_job
from tests.runtime_server import Reply


@pytest.mark.django_db
@pytest.mark.parametrize("api", ["ollama", "openai", "openai-chat"])
def test_a_streamed_call_has_its_token_counts(runtime, settings, api):
    settings.MODEL_RUNTIME_API = api
    runtime.script = lambda prompt, body: Reply(
        text="one two three", prompt_tokens=11, completion_tokens=3
    )
    generation = runtime_client.generate("test-model", "hi", should_stop=lambda: False)
    assert generation.text == "one two three"
    assert (generation.prompt_tokens, generation.completion_tokens) == (11, 3)
    [sent] = runtime.generate_requests()
    if api != "ollama":
        assert sent.body["stream_options"] == {"include_usage": True}


@pytest.mark.django_db
def test_an_unstreamed_openai_call_does_not_ask_for_stream_options(runtime, settings):
    settings.MODEL_RUNTIME_API = "openai"
    generation = runtime_client.generate("test-model", "a b")
    assert generation.prompt_tokens == 2
    [sent] = runtime.generate_requests()
    assert "stream_options" not in sent.body


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_an_agents_model_calls_record_their_token_counts(runtime, settings, make_key, api):
    settings.MODEL_RUNTIME_API = api
    runtime.script = lambda prompt, body: Reply(
        text="The answer.", prompt_tokens=40, completion_tokens=2
    )
    api_key, _ = make_key()
    job = make_job(api_key)
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    usage = UsageRecord.objects.filter(job_id=job.pk)
    assert usage.exists()
    assert {(u.prompt_tokens, u.completion_tokens) for u in usage} == {(40, 2)}
