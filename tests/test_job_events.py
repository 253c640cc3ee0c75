"""A job's events (agents.events) and their stream, GET /agent/job/{id}/events, read with a
real SSE client (httpx-sse) where a server streams, and with Django's test client for the
refusals and the replay of an ended job."""

import io
import json

import pytest
from django.core.management import call_command

from agents.models import Job, JobEvent, JobStatus
from tests.envelope import assert_error
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db

SCOPE = {"source": "web", "scope_type": "ticket", "scope_id": 7}


@pytest.fixture
def run_now(agent_client, sync_queue, django_capture_on_commit_callbacks, runtime):
    """Posts to ``path`` and runs the job inline, as a worker would once the request commits."""

    def post(path: str, body: dict) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            response = agent_client.post(path, {**SCOPE, **body}, format="json")
        assert response.status_code == 200, response.json()
        return response.json()["data"]

    return post


def parse_sse(body: bytes) -> list[tuple[int, str, dict]]:
    """The (id, event, data) of each event of a whole stream's body."""
    found = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "id" in fields:
            found.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return found


def stream_of(agent_client, job_id: str, **headers) -> list[tuple[int, str, dict]]:
    response = agent_client.get(f"/agent/job/{job_id}/events", **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "no-cache"
    return parse_sse(b"".join(response.streaming_content))


def test_a_finished_task_replays_its_events_in_order_and_the_stream_closes(
    run_now, agent_client, runtime
):
    runtime.script = lambda prompt, body: Reply(text="Paris is the capital of France.")
    job_id = run_now("/agent/job/start", {"task": "Write one sentence about Paris."})["job_id"]
    events = stream_of(agent_client, job_id)
    ids = [event[0] for event in events]
    assert ids == list(range(1, len(ids) + 1))
    statuses = [data["status"] for _, kind, data in events if kind == "status"]
    assert statuses == ["queued", "running", "finished"]
    job = agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert events[-1] == (
        ids[-1],
        "status",
        {"job_id": job_id, "status": "finished", "final_result": job["final_result"]},
    )
    # Each step's last event is the step exactly as GET /agent/job/{id} shows it.
    last_of_step = {data["index"]: data for _, kind, data in events if kind == "step"}
    assert [last_of_step[step["index"]] for step in job["steps"]] == job["steps"]
    tokens = [data for _, kind, data in events if kind == "token"]
    model_steps = [s for s in job["steps"] if s["kind"] == "model_call"]
    for step in model_steps:
        text = "".join(t["text"] for t in tokens if t["step"] == step["index"])
        assert text == step["output"]["text"]


def test_a_chat_streams_exactly_the_reply_it_stores_cleaned_as_it_flows(
    run_now, agent_client, runtime
):
    raw = "Sure, the train leaves at nine. Bring your ticket.\nUser: thanks\nAssistant: bye"
    runtime.script = lambda prompt, body: Reply(text=raw)
    data = run_now("/agent/chat", {"prompt": "When does the train leave?"})
    job = Job.objects.get(pk=data["job_id"])
    reply = job.final_result["message"]["content"]
    assert reply == "Sure, the train leaves at nine. Bring your ticket."
    events = stream_of(agent_client, job.pk)
    reply_step = max(
        data["index"] for _, kind, data in events if kind == "step" and data["name"] == "reply"
    )
    texts = [d["text"] for _, kind, d in events if kind == "token" and d["step"] == reply_step]
    assert "".join(texts) == reply


def test_a_reply_said_back_as_the_assistant_streams_as_it_is_stored(run_now, agent_client, runtime):
    runtime.script = lambda prompt, body: Reply(text="Nice.")
    run_now("/agent/chat", {"prompt": "I work as a nurse in Leeds."})
    runtime.script = lambda prompt, body: Reply(text="I work as a nurse in Leeds. I love it.")
    data = run_now("/agent/chat", {"prompt": "Where do I work?"})
    job = Job.objects.get(pk=data["job_id"])
    reply = job.final_result["message"]["content"]
    assert reply == "You work as a nurse in Leeds. I love it."  # nothing of theirs: as it was
    events = stream_of(agent_client, job.pk)
    assert not [d for _, kind, d in events if kind == "discard"]
    [reply_step] = {d["index"] for _, kind, d in events if kind == "step" and d["name"] == "reply"}
    texts = [d["text"] for _, kind, d in events if kind == "token" and d["step"] == reply_step]
    assert "".join(texts) == reply


def test_last_event_id_resumes_after_that_event_by_header_or_query(run_now, agent_client):
    job_id = run_now("/agent/job/start", {"task": "Say hi."})["job_id"]
    events = stream_of(agent_client, job_id)
    assert stream_of(agent_client, job_id, HTTP_LAST_EVENT_ID="2") == events[2:]
    response = agent_client.get(f"/agent/job/{job_id}/events?last_event_id=3")
    assert parse_sse(b"".join(response.streaming_content)) == events[3:]
    # Past the last event of an ended job: nothing more will come, the stream closes.
    assert stream_of(agent_client, job_id, HTTP_LAST_EVENT_ID=str(len(events) + 5)) == []


@pytest.mark.parametrize("bad", ["-1", "abc", "1.5", "", "٣"])
def test_a_last_event_id_that_is_not_a_non_negative_integer_is_a_validation_error(
    run_now, agent_client, bad
):
    job_id = run_now("/agent/job/start", {"task": "Say hi."})["job_id"]
    response = agent_client.get(f"/agent/job/{job_id}/events", HTTP_LAST_EVENT_ID=bad)
    assert_error(response, 400, "validation_error")
    response = agent_client.get(f"/agent/job/{job_id}/events", {"last_event_id": bad})
    assert_error(response, 400, "validation_error")


def test_the_stream_is_refused_as_the_job_is_another_owners_or_the_key_bad(
    run_now, api_client, make_key
):
    job_id = run_now("/agent/job/start", {"task": "Say hi."})["job_id"]
    _, other = make_key(name="someone-else")
    response = api_client.get(f"/agent/job/{job_id}/events", HTTP_X_API_KEY=other)
    assert_error(response, 404, "job_not_found")
    response = api_client.get(f"/agent/job/{job_id}/events", HTTP_AUTHORIZATION="Bearer nope")
    assert_error(response, 401, "invalid_api_key")
    response = api_client.get(f"/agent/job/{job_id}/events")
    assert_error(response, 401, "invalid_api_key")


def test_the_prune_command_deletes_a_jobs_events_with_it(run_now):
    job_id = run_now("/agent/job/start", {"task": "Say hi."})["job_id"]
    assert JobEvent.objects.filter(job_id=job_id).exists()
    call_command("prune", "--older-than", "0", stdout=io.StringIO())
    assert not Job.objects.filter(pk=job_id).exists()
    assert not JobEvent.objects.filter(job_id=job_id).exists()


def test_a_queued_job_cancelled_ends_with_its_cancelled_event(agent_client, runtime):
    job_id = agent_client.post(
        "/agent/job/start", {**SCOPE, "task": "Say hi."}, format="json"
    ).json()["data"]["job_id"]
    agent_client.post(f"/agent/job/{job_id}/cancel")
    assert Job.objects.get(pk=job_id).status == JobStatus.CANCELLED
    events = stream_of(agent_client, job_id)
    assert events == [
        (1, "status", {"job_id": job_id, "status": "queued"}),
        (2, "status", {"job_id": job_id, "status": "cancelled"}),
    ]
