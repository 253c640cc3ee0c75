"""Faults on the real service: a model runtime that dies or hangs, a worker killed or stalled,
the Redis broker restarted. Collected on PostgreSQL, the production database, only: they
test processes and queues, which do not depend on the database, and take seconds each.

Each test runs real ``qcluster`` processes on the test database (tests/live.py), breaks
something, waits with a deadline, and ends by checking what was stored: every job in the
state it must be in, run the number of times it must have run, and every conversation
holding each message once.
"""

import pytest
from django.conf import settings

from agents.models import Job, JobStatus, StepKind, StepStatus
from conversations.models import Message
from gateway.models import UsageRecord
from tests.factories import (
    default_profile,
    job_progress,
    recovery_seconds,
    wait_for,
    wait_while_moving,
)
from tests.live import Cluster
from tests.runtime_server import Reply, RuntimeServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: Clusters that notice a dead worker within seconds: the suite should not wait for the
#: production lease (10 s); the mechanism is the same.
FAST_RECOVERY = {
    "JOB_LEASE_SECONDS": "2",
    "JOB_HEARTBEAT_SECONDS": "0.5",
    "JOB_REAP_SECONDS": "0.5",
}
SLOW_ANSWER = Reply(text="word " * 200, chunk_delay=0.05)  # ten seconds of streaming


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


@pytest.fixture
def own_runtime():
    """A runtime of this test's own, which it may stop and start again on the same port."""
    with RuntimeServer(models=(settings.AGENT_MODEL,)) as server:
        yield server


def chat(client, prompt: str, scope_id: str = "fault-1") -> tuple[str, str]:
    body = {"source": "tests", "scope_type": "fault", "scope_id": scope_id, "prompt": prompt}
    response = client.post("/agent/chat", body, format="json")
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    return data["job_id"], data["conversation_id"]


def start_task(client) -> str:
    body = {"source": "tests", "scope_type": "fault", "scope_id": "t", "task": "Say hi."}
    response = client.post("/agent/job/start", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["data"]["job_id"]


def wait_until_ended(job_id: str, *clusters: Cluster) -> Job:
    """Waits while the job moves (runs, steps, heartbeats) or may be on its way back to a
    worker (a lease to run out, the reaper to come by)."""
    try:
        wait_while_moving(
            lambda: Job.objects.get(pk=job_id).is_terminal,
            progress=lambda: job_progress([job_id]),
            still_for=recovery_seconds(),
            what=f"job {job_id} to end",
        )
    except AssertionError:
        for cluster in clusters:
            print(cluster.output())
        raise
    return Job.objects.get(pk=job_id)


def wait_until_generating(runtime: RuntimeServer, job_id: str) -> Job:
    wait_for(
        lambda: runtime.generate_requests() and Job.objects.get(pk=job_id).steps.exists(),
        what="the worker to be generating",
    )
    return Job.objects.get(pk=job_id)


def messages(conversation_id: str) -> list[tuple[str, str]]:
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    return list(rows.values_list("role", "content"))


def test_a_runtime_killed_mid_answer_fails_that_chat_once_and_the_next_one_runs(
    agent_client, own_runtime, start_cluster
):
    own_runtime.script = lambda prompt, body: SLOW_ANSWER
    cluster = start_cluster(MODEL_RUNTIME_URL=own_runtime.url)
    first, conversation = chat(agent_client, "first")
    wait_until_generating(own_runtime, first)
    own_runtime.stop()  # every open connection is cut mid-stream
    failed = wait_until_ended(first, cluster)
    own_runtime.start()
    own_runtime.script = lambda prompt, body: "Back again."
    second, same = chat(agent_client, "second")
    finished = wait_until_ended(second, cluster)

    assert (failed.status, failed.attempts) == (JobStatus.FAILED, 1)
    assert failed.error.startswith("runtime_"), failed.error
    assert (finished.status, finished.attempts, same) == (JobStatus.FINISHED, 1, conversation)
    assert messages(conversation) == [
        ("user", "first"),
        ("user", "second"),
        ("assistant", "Back again."),
    ]
    usage = UsageRecord.objects.filter(job_id__in=(first, second)).order_by("created_at")
    assert [(u.job_id, u.status) for u in usage] == [(first, 502), (second, 200)]


def test_a_runtime_hanging_past_the_timeout_fails_that_chat_once_and_the_next_one_runs(
    agent_client, own_runtime, start_cluster
):
    own_runtime.script = lambda prompt, body: Reply(text="Too late.", delay=30)
    cluster = start_cluster(MODEL_RUNTIME_URL=own_runtime.url, RUNTIME_READ_TIMEOUT="1")
    first, conversation = chat(agent_client, "first")
    failed = wait_until_ended(first, cluster)
    wait_for(lambda: own_runtime.closed_early == 1, what="the runtime to see the hang-up")
    own_runtime.script = lambda prompt, body: "In time."
    second, _ = chat(agent_client, "second")
    finished = wait_until_ended(second, cluster)

    assert (failed.status, failed.error.split(":")[0]) == (JobStatus.FAILED, "runtime_timeout")
    assert (finished.status, finished.attempts) == (JobStatus.FINISHED, 1)
    assert messages(conversation) == [
        ("user", "first"),
        ("user", "second"),
        ("assistant", "In time."),
    ]
    assert len(own_runtime.generate_requests()) == 2


def test_a_chat_whose_worker_is_sigkilled_runs_again_elsewhere_and_answers_once(
    agent_client, own_runtime, start_cluster
):
    own_runtime.script = lambda prompt, body: SLOW_ANSWER
    doomed = start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **FAST_RECOVERY)
    job_id, conversation = chat(agent_client, "Are you there?")
    first_start = wait_until_generating(own_runtime, job_id).started_at
    own_runtime.script = lambda prompt, body: "Still here."
    doomed.kill()
    rescuer = start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **FAST_RECOVERY)
    job = wait_until_ended(job_id, rescuer)

    assert (job.status, job.attempts, job.started_at) == (JobStatus.FINISHED, 2, first_start)
    assert messages(conversation) == [("user", "Are you there?"), ("assistant", "Still here.")]
    calls = job.steps.filter(kind=StepKind.MODEL_CALL).order_by("index")
    assert [s.status for s in calls] == [StepStatus.FAILED, StepStatus.FINISHED]


def test_a_stalled_worker_that_resumes_after_its_job_was_taken_over_changes_nothing(
    agent_client, own_runtime, start_cluster
):
    import signal

    own_runtime.script = lambda prompt, body: SLOW_ANSWER
    stalled = start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **FAST_RECOVERY)
    job_id, conversation = chat(agent_client, "Hello?")
    wait_until_generating(own_runtime, job_id)
    stalled.signal_group(signal.SIGSTOP)
    own_runtime.script = lambda prompt, body: "Taken over."
    rescuer = start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **FAST_RECOVERY)
    job = wait_until_ended(job_id, rescuer)
    stalled.signal_group(signal.SIGCONT)
    wait_for(lambda: "lease lost" in stalled.output(), what="the resumed worker to give up")

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.FINISHED, 2)
    assert job.final_result["message"]["content"] == "Taken over."
    assert messages(conversation) == [("user", "Hello?"), ("assistant", "Taken over.")]


def test_jobs_run_once_each_across_restarts_of_the_redis_broker(
    agent_client, runtime, start_cluster, redis_server, use_redis_broker
):
    runtime.script = lambda prompt, body: "Done."
    broker = use_redis_broker(redis_server.url)
    cluster = start_cluster(**broker, JOB_REAP_SECONDS="0.5", JOB_REWAKE_SECONDS="2")
    before = start_task(agent_client)
    wait_until_ended(before, cluster)

    redis_server.kill()  # a restart: the server comes back empty
    redis_server.start()
    after = start_task(agent_client)  # the clusters' intake must have survived it
    wait_until_ended(after, cluster)

    redis_server.kill()
    during = start_task(agent_client)  # committed; its wake-up is lost with the server
    redis_server.start()
    wait_until_ended(during, cluster)  # woken again by the reaper

    jobs = Job.objects.filter(pk__in=(before, after, during))
    assert sorted(jobs.values_list("status", "attempts")) == [(JobStatus.FINISHED, 1)] * 3
    assert len(runtime.generate_requests()) == 3
    assert "Failed to pull task from broker" not in cluster.output()  # the intake never stopped
