"""Agent models streamed through the OpenAI-compatible face: the official ``openai`` SDK
against the production request path (uvicorn serving config.asgi) while a real cluster
runs the chat job, the reply relayed token by token from the job's events."""

import httpx
import openai
import pytest

from agents.models import Job, JobStatus
from conversations.models import Message
from tests.factories import default_profile, wait_for
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)
WORDS = ["Streaming.", " It", " works.", " One", " piece.", " At", " a", " time."]


@pytest.fixture
def base_url(asgi_server) -> str:
    host, port = asgi_server
    return f"http://{host}:{port}/v1"


@pytest.fixture
def cluster(start_cluster, runtime):
    default_profile()
    return start_cluster()


def test_an_agent_models_reply_arrives_token_by_token_while_the_job_runs(
    base_url, api_key, cluster, runtime
):
    runtime.script = lambda prompt, body: Reply(text="".join(WORDS), chunk_delay=0.3)
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
    stream = client.chat.completions.create(
        model="agent/default",
        user="dana",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "tell me"}],
    )
    pieces, running_when_seen, ids = [], [], set()
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
            job = Job.objects.get(pk=chunk.model_extra["job_id"])
            running_when_seen.append(job.status == JobStatus.RUNNING)
            ids.add((chunk.model_extra["job_id"], chunk.model_extra["conversation_id"]))
        last = chunk
    # Tokens, not the reply cut up after the job ended: most arrive while it still runs.
    assert len(pieces) >= 3
    assert running_when_seen[0] and sum(running_when_seen) >= 3
    assert "".join(pieces) == "".join(WORDS)
    [reply] = Message.objects.filter(role="assistant")
    assert reply.content == "".join(pieces)
    assert last.choices == [] and last.usage.completion_tokens == len(WORDS)
    assert ids == {(reply.job_id, reply.conversation_id)}


def test_the_async_sdk_streams_an_agent_model_too(base_url, api_key, cluster, runtime):
    import asyncio

    runtime.script = lambda prompt, body: Reply(text="Async and alive.", chunk_delay=0.05)

    async def call() -> str:
        async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0) as c:
            stream = await c.chat.completions.create(
                model="agent/default",
                user="erin",
                stream=True,
                messages=[{"role": "user", "content": "hi"}],
            )
            return "".join([ch.choices[0].delta.content or "" async for ch in stream])

    assert asyncio.run(call()) == "Async and alive."


def test_a_failed_agent_job_ends_the_stream_with_an_error(base_url, api_key, cluster, runtime):
    runtime.script = lambda prompt, body: Reply(status=500, error="kaput")
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
    with pytest.raises(openai.APIStatusError) as raised:
        list(
            client.chat.completions.create(
                model="agent/default",
                user="fay",
                stream=True,
                messages=[{"role": "user", "content": "hi"}],
            )
        )
    assert (raised.value.status_code, raised.value.code) == (502, "job_failed")


def test_a_client_that_goes_away_mid_reply_cancels_the_chat_job(
    base_url, api_key, cluster, runtime
):
    runtime.script = lambda prompt, body: Reply(text=" ".join(["Word."] * 200), chunk_delay=0.1)
    body = {
        "model": "agent/default",
        "user": "gus",
        "stream": True,
        "messages": [{"role": "user", "content": "go on"}],
    }
    headers = {"Authorization": f"Bearer {api_key}"}
    url = f"{base_url}/chat/completions"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert next(line for line in answer.iter_lines() if "Word." in line)
    job = Job.objects.get()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED,
        what="the chat job to be cancelled",
    )
    wait_for(lambda: runtime.closed_early >= 1, what="the runtime call to be closed")
    assert not Message.objects.filter(role="assistant").exists()


def test_an_attempt_the_agent_does_not_keep_is_followed_by_the_stored_reply(
    base_url, api_key, cluster, runtime
):
    # The default profile's example conversation keeps a bike in the shed: a reply that
    # names them borrows from it and is asked again, sampling.
    def script(prompt, body):
        options = body.get("options") or {}
        sampled = options.get("temperature", body.get("temperature")) == 0.7
        text = "Good to hear." if sampled else "Your bike is in the shed."
        return Reply(text=text, chunk_delay=0.05)

    runtime.script = script
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
    stream = client.chat.completions.create(
        model="agent/default",
        user="hal",
        stream=True,
        messages=[{"role": "user", "content": "I went for a run."}],
    )
    shown = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    [reply] = Message.objects.filter(role="assistant")
    assert reply.content == "Good to hear."
    # Sent text cannot be taken back: the stored reply follows it after a blank line.
    assert shown == "Your bike is in the shed.\n\nGood to hear."
