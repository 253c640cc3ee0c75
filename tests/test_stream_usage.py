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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("api", ["ollama", "openai", "openai-chat"])
@pytest.mark.parametrize("streamed", [True, False])
def test_a_call_whose_runtime_reports_no_counts_is_counted_with_the_tokenizer(
    runtime, settings, make_key, api, streamed
):
    from gateway import services
    from gateway.routing import clear_cache

    settings.MODEL_RUNTIME_API = api
    clear_cache()
    runtime.reports_usage = False
    runtime.script = lambda prompt, body: Reply(text="three little words")
    api_key, _ = make_key(scopes=("model", "agent"))
    result = services.model_call(
        api_key=api_key,
        model="test-model",
        prompt="count these four words",
        origin=UsageRecord.Origin.AGENT if streamed else UsageRecord.Origin.API,
        should_stop=(lambda: False) if streamed else None,
    )
    # the loopback runtime's tokenizer counts words
    assert (result.prompt_tokens, result.completion_tokens) == (4, 3)
    assert result.tokens_estimated
    [usage] = UsageRecord.objects.all()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.tokens_estimated) == (4, 3, True)


@pytest.mark.django_db(transaction=True)
def test_counts_a_runtime_reports_are_not_marked_estimated(runtime, make_key):
    from gateway import services

    runtime.script = lambda prompt, body: Reply(text="x", prompt_tokens=9, completion_tokens=1)
    api_key, _ = make_key()
    services.model_call(api_key=api_key, model="test-model", prompt="hi")
    [usage] = UsageRecord.objects.all()
    assert (usage.prompt_tokens, usage.completion_tokens, usage.tokens_estimated) == (9, 1, False)


@pytest.mark.django_db(transaction=True)
def test_an_agents_model_call_on_a_runtime_without_counts_records_estimated_counts(
    runtime, make_key
):
    runtime.reports_usage = False
    runtime.script = lambda prompt, body: Reply(text="Crisp leaves fall.")
    api_key, _ = make_key()
    job = make_job(api_key, task="Write a haiku about autumn.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    [usage] = UsageRecord.objects.filter(job_id=job.pk)
    assert usage.completion_tokens == 3 and usage.prompt_tokens > 10
    assert usage.tokens_estimated
    step = job.steps.get(kind="model_call")
    assert step.output["tokens_estimated"] is True
    assert step.output["completion_tokens"] == 3
