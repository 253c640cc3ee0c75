"""The OpenAI-compatible face (/v1/), driven by the official ``openai`` SDK and LiteLLM's SDK
through the production request path (uvicorn serving config.asgi) to the loopback runtime."""

import asyncio
import json

import openai
import pytest

from gateway.models import UsageRecord
from tests.factories import default_profile
from tests.runtime_server import Reply

PROTOCOLS = ("ollama", "openai")


@pytest.fixture
def base_url(asgi_server) -> str:
    host, port = asgi_server
    return f"http://{host}:{port}/v1"


@pytest.fixture
def client(base_url, api_key) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)


@pytest.fixture(params=PROTOCOLS)
def protocol(request, runtime, settings) -> str:
    """The loopback runtime as the default endpoint, speaking Ollama's API or OpenAI's."""
    settings.MODEL_RUNTIME_API = request.param
    return request.param


def usage_rows() -> list[UsageRecord]:
    return list(UsageRecord.objects.order_by("pk"))


def test_a_chat_completion_sends_the_messages_as_received_and_records_usage(
    client, runtime, protocol
):
    runtime.script = lambda prompt, body: Reply(text="Paris.", prompt_tokens=7, completion_tokens=2)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
    ]
    answer = client.chat.completions.create(
        model="test-model", messages=messages, temperature=0.2, max_tokens=20, seed=3
    )
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content == "Paris."
    assert answer.choices[0].finish_reason == "stop"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (7, 2)
    [sent] = runtime.generate_requests()
    if protocol == "ollama":
        assert sent.path == "/api/chat"
        assert sent.body["options"] == {"temperature": 0.2, "seed": 3, "num_predict": 20}
    else:
        assert sent.path == "/v1/chat/completions"
        assert (sent.body["temperature"], sent.body["seed"], sent.body["max_tokens"]) == (
            0.2,
            3,
            20,
        )
    assert sent.body["messages"] == messages
    [row] = usage_rows()
    assert (row.origin, row.model, row.status) == ("openai", "test-model", 200)
    assert (row.prompt_tokens, row.completion_tokens) == (7, 2)
    assert row.prompt_chars == len("Be brief.") + len("Capital of France?")


def test_a_stateless_call_leaves_no_prompt_text_in_the_database(client, runtime, django_db_blocker):
    from django.db import connection

    secret = "zanzibar-quokka-41"
    runtime.script = lambda prompt, body: f"the answer mentions {secret} too"
    client.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": secret}]
    )
    client.completions.create(model="test-model", prompt=secret)
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            assert secret not in json.dumps(cursor.fetchall(), default=str), table


def test_a_streamed_chat_completion_arrives_chunk_by_chunk_with_usage_last(
    client, runtime, protocol
):
    runtime.script = lambda prompt, body: Reply(text="one two three", chunk_delay=0.01)
    stream = client.chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": "count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert pieces == ["one", " two", " three"]
    assert chunks[0].choices[0].delta.role == "assistant"
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 3
    [row] = usage_rows()
    assert (row.origin, row.status, row.completion_tokens) == ("openai", 200, 3)


def test_the_async_sdk_streams_and_completes(base_url, api_key, runtime, protocol):
    runtime.script = lambda prompt, body: Reply(text=f"re: {prompt}")

    async def calls():
        async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0) as client:
            whole = await client.chat.completions.create(
                model="test-model", messages=[{"role": "user", "content": "hi"}]
            )
            stream = await client.completions.create(model="test-model", prompt="yo", stream=True)
            streamed = "".join([chunk.choices[0].text async for chunk in stream if chunk.choices])
            return whole.choices[0].message.content, streamed

    assert asyncio.run(calls()) == ("re: hi", "re: yo")


def test_a_completion_takes_the_raw_prompt_path(client, runtime, protocol):
    answer = client.completions.create(model="test-model", prompt="Once upon", max_tokens=5)
    assert answer.object == "text_completion"
    assert answer.choices[0].text == "echo: Once upon"
    [sent] = runtime.generate_requests()
    assert sent.path == ("/api/generate" if protocol == "ollama" else "/v1/completions")
    assert sent.body["prompt"] == "Once upon"


def test_the_models_are_those_the_key_may_use(base_url, runtime, make_key):
    default_profile()
    _, plain = make_key(allowed_models=["test-model", "all-minilm-l6-v2"])
    client = openai.OpenAI(base_url=base_url, api_key=plain, max_retries=0)
    names = [model.id for model in client.models.list()]
    assert names[:2] == ["all-minilm-l6-v2", "test-model"]
    assert "other-model" not in names
    assert "agent/default" in names
    _, model_only = make_key(name="m", scopes=["model"])
    everything = openai.OpenAI(base_url=base_url, api_key=model_only, max_retries=0)
    names = [model.id for model in everything.models.list()]
    assert {"test-model", "other-model", "all-minilm-l6-v2"} <= set(names)
    assert not [name for name in names if name.startswith("agent/")]


def test_embeddings_come_from_the_in_process_model_in_both_encodings(base_url, api_key, runtime):
    import httpx

    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    answer = client.embeddings.create(model="all-minilm-l6-v2", input=["a cat", "a dog"])
    assert [len(item.embedding) for item in answer.data] == [384, 384]
    assert answer.usage.prompt_tokens > 0
    plain = httpx.post(
        f"{base_url}/embeddings",
        headers={"Authorization": f"Bearer {api_key}"},
        json={"model": "all-minilm-l6-v2", "input": "a cat", "encoding_format": "float"},
    ).json()
    assert plain["data"][0]["embedding"] == pytest.approx(answer.data[0].embedding, abs=1e-6)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="all-minilm-l6-v2", input="x", dimensions=128)
    assert refused.value.body["param"] == "dimensions"
    assert [row.origin for row in usage_rows()] == ["openai", "openai"]


@pytest.mark.parametrize(
    ("call", "error", "status", "code", "param"),
    [
        ("bad_key", openai.AuthenticationError, 401, "invalid_api_key", None),
        ("n", openai.BadRequestError, 400, "invalid_value", "n"),
        ("temperature", openai.BadRequestError, 400, "invalid_value", "temperature"),
        ("unknown_model", openai.NotFoundError, 404, "model_not_found", "model"),
        ("not_allowed", openai.PermissionDeniedError, 403, "forbidden", "model"),
    ],
)
def test_errors_answer_in_openais_shape(
    base_url, api_key, make_key, runtime, call, error, status, code, param
):
    key = api_key
    kwargs = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
    if call == "bad_key":
        key = "sk-not-a-key"
    elif call == "n":
        kwargs["n"] = 2
    elif call == "temperature":
        kwargs["temperature"] = 5
    elif call == "unknown_model":
        kwargs["model"] = "no-such-model"
    elif call == "not_allowed":
        key = make_key(name="narrow", allowed_models=["other-model"])[1]
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
    with pytest.raises(error) as raised:
        client.chat.completions.create(**kwargs)
    assert raised.value.status_code == status
    assert raised.value.code == code
    assert raised.value.param == param
    assert raised.value.body["type"]


def test_a_key_over_its_rate_limit_gets_429_with_retry_after(base_url, runtime, make_key):
    _, plain = make_key(rate_limit_per_minute=1)
    client = openai.OpenAI(base_url=base_url, api_key=plain, max_retries=0)
    client.completions.create(model="test-model", prompt="one")
    with pytest.raises(openai.RateLimitError) as raised:
        client.completions.create(model="test-model", prompt="two")
    assert raised.value.code == "rate_limit_exceeded"
    assert int(raised.value.response.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        (Reply(status=503, error="busy"), 503, "runtime_busy"),
        (Reply(delay=3), 504, "runtime_timeout"),
        (Reply(status=500, error="boom"), 502, "runtime_error"),
    ],
)
def test_runtime_failures_answer_their_statuses(client, runtime, settings, reply, status, code):
    settings.RUNTIME_READ_TIMEOUT = 0.5
    runtime.script = lambda prompt, body: reply
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(
                model="test-model", messages=[{"role": "user", "content": "x"}], stream=stream
            )
        assert (raised.value.status_code, raised.value.code) == (status, code)


def test_a_runtime_that_is_down_is_502(client, runtime, settings):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(openai.APIStatusError) as raised:
        client.completions.create(model="test-model", prompt="x")
    assert (raised.value.status_code, raised.value.code) == (502, "runtime_unavailable")


def test_unknown_paths_under_v1_answer_openais_404(base_url, api_key):
    import httpx

    answer = httpx.get(f"{base_url}/files", headers={"Authorization": f"Bearer {api_key}"})
    assert answer.status_code == 404
    assert set(answer.json()["error"]) == {"message", "type", "param", "code"}


def test_a_client_that_goes_away_cancels_the_runtime_call(base_url, api_key, runtime):
    import httpx

    from tests.factories import wait_for

    runtime.script = lambda prompt, body: Reply(text=" ".join(["word"] * 200), chunk_delay=0.1)
    body = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, headers=headers) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        lines = answer.iter_lines()
        assert next(line for line in lines if "word" in line)
    wait_for(lambda: runtime.closed_early == 1, what="the runtime call to be closed")
    wait_for(lambda: UsageRecord.objects.exists(), what="the usage row")
    [row] = usage_rows()
    assert (row.status, row.error) == (499, "cancelled")


def test_litellms_sdk_works_as_a_client(base_url, api_key, runtime, protocol):
    import litellm

    runtime.script = lambda prompt, body: Reply(text=f"lite {prompt}")
    kwargs = {"model": "openai/test-model", "api_base": base_url, "api_key": api_key}
    whole = litellm.completion(messages=[{"role": "user", "content": "a"}], **kwargs)
    assert whole.choices[0].message.content == "lite a"
    stream = litellm.completion(messages=[{"role": "user", "content": "b"}], stream=True, **kwargs)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == "lite b"
    vectors = litellm.embedding(
        model="openai/all-minilm-l6-v2", input=["x"], api_base=base_url, api_key=api_key
    )
    assert len(vectors.data[0]["embedding"]) == 384


def test_response_format_asks_the_runtime_for_json(client, runtime, protocol):
    runtime.script = lambda prompt, body: '{"a": 1}'
    client.chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": "json please"}],
        response_format={"type": "json_object"},
    )
    [sent] = runtime.generate_requests()
    if protocol == "ollama":
        assert sent.body["format"] == "json"
    else:
        assert sent.body["response_format"] == {"type": "json_object"}


# --- Agents as models -------------------------------------------------------------------


@pytest.fixture
def agent(runtime, sync_queue):
    """The default profile; chat jobs run inline once their request commits."""
    default_profile()
    runtime.script = lambda prompt, body: Reply(text="Noted.")
    return runtime


def test_an_agent_model_carries_the_first_message_into_the_second_prompt(client, agent):
    first = client.chat.completions.create(
        model="agent/default",
        user="alice",
        messages=[{"role": "user", "content": "My locker code is 4821."}],
    )
    assert first.choices[0].message.content == "Noted."
    extra = first.model_extra
    assert extra["conversation_id"] and extra["job_id"]
    second = client.chat.completions.create(
        model="agent/default",
        user="alice",
        messages=[
            {"role": "system", "content": "ignored by the agent"},
            {"role": "user", "content": "What is my locker code?"},
        ],
    )
    assert second.model_extra["conversation_id"] == extra["conversation_id"]
    last_prompt = json.dumps(agent.generate_requests()[-1].body)
    assert "4821" in last_prompt
    assert "ignored by the agent" not in last_prompt


def test_an_agent_model_without_a_user_is_400(client, agent):
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="agent/default", messages=[{"role": "user", "content": "hi"}]
        )
    assert raised.value.param == "user"


def test_an_agent_models_conversation_may_be_named_by_metadata(client, agent):
    from conversations.models import Conversation

    client.chat.completions.create(
        model="agent/default",
        metadata={"source": "crm", "scope_type": "ticket", "scope_id": "77"},
        messages=[{"role": "user", "content": "hello"}],
    )
    conversation = Conversation.objects.get()
    assert (conversation.source, conversation.scope_type, conversation.scope_id) == (
        "crm",
        "ticket",
        "77",
    )


def test_an_unknown_agent_profile_is_404(client, agent):
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(
            model="agent/nobody", user="u", messages=[{"role": "user", "content": "hi"}]
        )
    assert raised.value.code == "model_not_found"


def test_a_failed_agent_job_answers_an_error(client, agent):
    agent.script = lambda prompt, body: Reply(status=500, error="kaput")
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(
            model="agent/default", user="bob", messages=[{"role": "user", "content": "hi"}]
        )
    assert (raised.value.status_code, raised.value.code) == (502, "job_failed")


def test_an_agent_model_streams_its_reply(client, agent):
    agent.script = lambda prompt, body: Reply(text="All good here.")
    chunks = list(
        client.chat.completions.create(
            model="agent/default",
            user="carol",
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "how are you?"}],
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "All good here."
    assert chunks[0].model_extra["job_id"]
    assert chunks[-1].usage.completion_tokens >= 1


def test_a_streamed_call_counts_its_runtime_call_and_its_time_to_first_token(
    client, runtime, protocol
):
    from django.test import Client
    from prometheus_client.parser import text_string_to_metric_families

    def samples() -> dict[str, float]:
        """The two samples of test-model, summed over their other labels (endpoints)."""
        text = Client().get("/metrics").content.decode()
        totals = dict.fromkeys(
            ("llmgw_runtime_requests_total", "llmgw_runtime_time_to_first_token_seconds_count"),
            0.0,
        )
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if (
                    s.name in totals
                    and s.labels.get("model") == "test-model"
                    and s.labels.get("outcome", "ok") == "ok"
                ):
                    totals[s.name] += s.value
        return totals

    before = samples()
    runtime.script = lambda prompt, body: Reply(text="one two three", chunk_delay=0.01)
    stream = client.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": "count"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    after = samples()
    for name in ("llmgw_runtime_requests_total", "llmgw_runtime_time_to_first_token_seconds_count"):
        assert after[name] - before[name] == 1, name


def test_a_streamed_call_on_a_runtime_without_counts_records_estimated_counts(
    client, runtime, protocol
):
    runtime.reports_usage = False
    runtime.script = lambda prompt, body: Reply(text="three little words", chunk_delay=0.01)
    stream = client.chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": "count these four"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    # the loopback runtime's tokenizer counts words
    assert chunks[-1].usage.completion_tokens == 3
    [row] = usage_rows()
    assert (row.completion_tokens, row.tokens_estimated) == (3, True)
    assert row.prompt_tokens >= 3
