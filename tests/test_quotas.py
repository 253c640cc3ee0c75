"""Quotas on every face: the agent API's per-key rate limits (writes and reads counted
apart), the key's jobs queued or running at once, the size of a task and a chat prompt,
and an agent's own model calls, which spend none of the client's limits."""

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from agents.models import Job, JobStatus
from tests.envelope import assert_error

pytestmark = pytest.mark.django_db

TASK = {"source": "s", "scope_type": "t", "scope_id": "1", "task": "Say hello."}
CHAT = {"source": "s", "scope_type": "t", "scope_id": "1", "prompt": "hello"}


def bearer(plain: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    return client


def test_a_key_whose_model_limit_is_spent_is_still_limited_on_the_agent_api(make_key):
    _, plain = make_key(rate_limit_per_minute=1, agent_starts_per_minute=3)
    client = bearer(plain)
    for _ in range(3):
        assert client.post("/agent/chat", CHAT, format="json").status_code == 200
    response = client.post("/agent/chat", CHAT, format="json")
    body = assert_error(response, 429, "rate_limited")
    assert body["details"]["limit_per_minute"] == 3
    assert 1 <= int(response["Retry-After"]) <= 60


def test_agent_writes_and_reads_are_counted_apart(make_key):
    _, plain = make_key(agent_starts_per_minute=1, agent_reads_per_minute=2)
    client = bearer(plain)
    job_id = client.post("/agent/job/start", TASK, format="json").json()["data"]["job_id"]
    assert_error(client.post("/agent/job/start", TASK, format="json"), 429, "rate_limited")
    assert client.get(f"/agent/job/{job_id}").status_code == 200
    assert client.get(f"/agent/job/{job_id}").status_code == 200
    assert_error(client.get(f"/agent/job/{job_id}"), 429, "rate_limited")


def test_a_key_with_its_jobs_at_the_limit_is_told_too_many_jobs(make_key):
    api_key, plain = make_key(max_active_jobs=2)
    client = bearer(plain)
    ids = [client.post("/agent/job/start", TASK, format="json").json()["data"]["job_id"]]
    ids.append(client.post("/agent/chat", CHAT, format="json").json()["data"]["job_id"])
    response = client.post("/agent/job/start", TASK, format="json")
    body = assert_error(response, 429, "too_many_jobs")
    assert body["details"]["max_active_jobs"] == 2
    assert response["Retry-After"]
    assert Job.objects.filter(api_key=api_key).count() == 2
    # Once one ends there is room again.
    Job.objects.filter(pk=ids[0]).update(status=JobStatus.CANCELLED, finished_at=timezone.now())
    assert client.post("/agent/job/start", TASK, format="json").status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "field", "setting"),
    [
        ("/agent/job/start", TASK, "task", "AGENT_TASK_MAX_CHARS"),
        ("/agent/chat", CHAT, "prompt", "AGENT_PROMPT_MAX_CHARS"),
    ],
)
def test_a_task_or_prompt_past_its_size_limit_is_refused_with_the_limit(
    make_key, settings, path, body, field, setting
):
    _, plain = make_key()
    limit = 50
    setattr(settings, setting, limit)
    response = bearer(plain).post(path, {**body, field: "x" * (limit + 1)}, format="json")
    details = assert_error(response, 413, "payload_too_large")["details"]
    assert details == {"field": field, "max_chars": limit, "chars": limit + 1}
    assert not Job.objects.exists()
    ok = bearer(plain).post(path, {**body, field: "x" * limit}, format="json")
    assert ok.status_code == 200


def test_an_agents_own_model_calls_do_not_spend_the_keys_request_limit(
    make_key, runtime, sync_queue, django_capture_on_commit_callbacks
):
    _, plain = make_key(rate_limit_per_minute=1)
    runtime.script = lambda prompt, body: "Hello."
    client = bearer(plain)
    for scope_id in ("a", "b", "c"):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post("/agent/chat", {**CHAT, "scope_id": scope_id}, format="json")
        job = Job.objects.get(pk=response.json()["data"]["job_id"])
        assert job.status == JobStatus.FINISHED, job.error
    # The key's one model call a minute is still there for /api.php.
    answer = APIClient().post(
        "/api.php", {"api_key": plain, "model": "test-model", "prompt": "hi"}, format="json"
    )
    assert answer.status_code == 200


def test_create_api_key_sets_the_agent_limits(db, capsys):
    call_command(
        "create_api_key",
        "--name",
        "quota",
        "--agent-starts-per-minute",
        "5",
        "--agent-reads-per-minute",
        "50",
        "--max-active-jobs",
        "2",
    )
    from gateway.models import ApiKey

    key = ApiKey.objects.get(name="quota")
    assert (key.agent_starts_per_minute, key.agent_reads_per_minute, key.max_active_jobs) == (
        5,
        50,
        2,
    )


def test_a_new_key_gets_the_default_agent_limits(db, settings):
    from gateway.services import api_key_create

    key, _ = api_key_create(name="defaults")
    assert key.agent_starts_per_minute == settings.DEFAULT_KEY_AGENT_STARTS_PER_MINUTE
    assert key.agent_reads_per_minute == settings.DEFAULT_KEY_AGENT_READS_PER_MINUTE
    assert key.max_active_jobs == settings.DEFAULT_KEY_MAX_ACTIVE_JOBS
