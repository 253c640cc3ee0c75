"""Jobs on a real ``manage.py qcluster`` subprocess, sharing the test database.

The test process starts jobs through the API and the cluster runs them, on the suite's
database (a file on SQLite, the test database on PostgreSQL), with the database broker
or with Redis. The loopback runtime of the test process answers the model calls.
"""

import io
import os
import threading
import time
from collections.abc import Callable

import pytest
from django.core.management import call_command

from agents import recovery
from agents.models import Job, JobStatus, Step, StepKind, StepStatus
from tests.factories import default_profile, wait_for
from tests.live import Cluster
from tests.runtime_server import Reply
from tests.test_jobs_api import BODY, START, post_json

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(autouse=True)
def profile():
    """Jobs started through the API run with the default profile."""
    return default_profile()


@pytest.fixture
def redis_broker(use_redis_broker) -> dict[str, str]:
    """Enqueues on the Redis of TEST_REDIS_URL; the clusters' environment for it."""
    return use_redis_broker(REDIS_URL)


def start_job(client) -> str:
    response = post_json(client, START, BODY)
    assert response.status_code == 200, response.content
    return response.json()["data"]["job_id"]


def wait_for_status(client, job_id: str, *statuses: str, cluster: Cluster) -> dict:
    def ended():
        data = client.get(f"/agent/job/{job_id}").json()["data"]
        return data if data["status"] in statuses else None

    try:
        return wait_for(ended, timeout=45, what=f"job {job_id} to be {'/'.join(statuses)}")
    except AssertionError:
        print(cluster.output())
        raise


def start_job_and_kill_its_worker(client, runtime, start_cluster) -> str:
    """Starts a job on a cluster and SIGKILLs the cluster while the model generates.

    The cluster's lease is short, so that the job is reapable two seconds after it died.
    """
    doomed = start_cluster(JOB_LEASE_SECONDS="2", JOB_HEARTBEAT_SECONDS="0.5")
    job_id = start_job(client)
    wait_for(
        lambda: (
            runtime.generate_requests()
            and Step.objects.filter(job_id=job_id, status=StepStatus.RUNNING).exists()
        ),
        timeout=45,
        what="the worker to be generating",
    )
    doomed.kill()
    return job_id


def test_a_job_runs_end_to_end_on_a_qcluster(agent_client, runtime, start_cluster):
    runtime.script = lambda prompt, body: "Hello from the cluster."
    cluster = start_cluster()
    job_id = start_job(agent_client)
    data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=cluster)
    assert data["status"] == "finished", data
    assert data["final_result"]["text"] == "Hello from the cluster."
    assert [s["kind"] for s in data["steps"]] == ["model_call"]
    assert data["attempts"] == 1
    assert len(runtime.generate_requests()) == 1


def test_a_job_runs_end_to_end_with_the_redis_broker(
    agent_client, runtime, start_cluster, redis_broker
):
    runtime.script = lambda prompt, body: "Hello over Redis."
    cluster = start_cluster(**redis_broker)
    job_id = start_job(agent_client)
    data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=cluster)
    assert data["status"] == "finished", data
    assert data["final_result"]["text"] == "Hello over Redis."


def test_a_job_whose_worker_is_killed_is_reaped_and_finished_by_another(
    agent_client, runtime, start_cluster
):
    first_call = []

    def script(prompt: str, body: dict) -> Reply:
        if not first_call:  # the first worker's call takes half a minute
            first_call.append(True)
            return Reply(text="word " * 300, chunk_delay=0.1)
        return Reply(text="Finished by the second worker.")

    runtime.script = script
    job_id = start_job_and_kill_its_worker(agent_client, runtime, start_cluster)
    assert Job.objects.get(pk=job_id).status == JobStatus.RUNNING
    wait_for(lambda: runtime.closed_early == 1, what="the runtime to see the hang-up")

    # The reaper (as the schedule runs it) re-queues the job once its lease has expired.
    wait_for(lambda: recovery.job_reap()["requeued"], what="the lease to expire")
    job = Job.objects.get(pk=job_id)
    assert job.status == JobStatus.QUEUED
    assert job.steps.get().status == StepStatus.FAILED

    rescuer = start_cluster()
    data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=rescuer)
    assert data["status"] == "finished", data
    assert data["final_result"]["text"] == "Finished by the second worker."
    assert data["attempts"] == 2
    assert [(s["kind"], s["status"]) for s in data["steps"]] == [
        (StepKind.MODEL_CALL, StepStatus.FAILED),
        (StepKind.MODEL_CALL, StepStatus.FINISHED),
    ]


def test_a_job_whose_worker_is_killed_on_its_last_attempt_fails(
    agent_client, runtime, start_cluster, settings
):
    settings.JOB_MAX_ATTEMPTS = 1
    runtime.script = lambda prompt, body: Reply(text="word " * 300, chunk_delay=0.1)
    job_id = start_job_and_kill_its_worker(agent_client, runtime, start_cluster)

    def reaped() -> bool:
        call_command("reap_jobs", stdout=io.StringIO())
        return Job.objects.get(pk=job_id).status != JobStatus.RUNNING

    wait_for(reaped, what="the reaper to end the job")
    data = agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert data["status"] == "failed"
    assert "stopped responding" in data["error"]
    assert [s["status"] for s in data["steps"]] == [StepStatus.FAILED]


# --- Several jobs per worker process (JOB_THREADS) --------------------------------------


def in_flight_together(count: int, then: Callable[[], Reply | str]) -> Callable:
    """A runtime script that answers no call before ``count`` calls are in flight at once
    (a worker process holding fewer jobs at a time fails them all), then ``then()``."""
    together = threading.Barrier(count, timeout=30)

    def script(prompt: str, body: dict) -> Reply | str:
        together.wait()
        return then()

    return script


def test_one_worker_process_holds_several_jobs_in_flight_at_once(
    agent_client, runtime, start_cluster
):
    runtime.script = in_flight_together(3, lambda: "Answered together.")
    cluster = start_cluster(Q_WORKERS="1", JOB_THREADS="3")
    job_ids = [start_job(agent_client) for _ in range(3)]
    for job_id in job_ids:
        data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=cluster)
        assert data["status"] == "finished", data
        assert data["final_result"]["text"] == "Answered together."
        assert data["attempts"] == 1
    assert len(runtime.generate_requests()) == 3


def test_jobs_of_a_killed_worker_process_are_all_reaped_and_finished_by_another(
    agent_client, runtime, start_cluster
):
    calls = []

    def hang_then_answer() -> Reply | str:
        calls.append(True)
        if len(calls) <= 2:  # the first process's calls take half a minute
            return Reply(text="word " * 300, chunk_delay=0.1)
        return "Finished elsewhere."

    runtime.script = in_flight_together(2, hang_then_answer)
    doomed = start_cluster(
        Q_WORKERS="1", JOB_THREADS="2", JOB_LEASE_SECONDS="2", JOB_HEARTBEAT_SECONDS="0.5"
    )
    job_ids = [start_job(agent_client) for _ in range(2)]
    wait_for(lambda: len(calls) == 2, timeout=45, what="both jobs to be generating at once")
    doomed.kill()
    wait_for(lambda: runtime.closed_early == 2, what="the runtime to see both hang-ups")

    def both_requeued() -> bool:
        recovery.job_reap()  # as the schedule runs it
        return Job.objects.filter(pk__in=job_ids, status=JobStatus.QUEUED).count() == 2

    wait_for(both_requeued, what="both leases to expire")

    rescuer = start_cluster(Q_WORKERS="1", JOB_THREADS="2")
    for job_id in job_ids:
        data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=rescuer)
        assert data["status"] == "finished", data
        assert data["final_result"]["text"] == "Finished elsewhere."
        assert data["attempts"] == 2


def test_a_stopped_cluster_finishes_the_jobs_its_threads_are_running(
    agent_client, runtime, start_cluster
):
    calls = []

    def slow_answer() -> Reply:
        calls.append(True)
        return Reply(text="Finished before the stop. ", chunks=10, chunk_delay=0.3)

    runtime.script = in_flight_together(2, slow_answer)
    cluster = start_cluster(Q_WORKERS="1", JOB_THREADS="2")
    job_ids = [start_job(agent_client) for _ in range(2)]
    wait_for(lambda: len(calls) == 2, timeout=45, what="both jobs to be generating at once")
    cluster.process.terminate()  # SIGTERM to the cluster alone, as a supervisor sends it
    cluster.process.wait(timeout=40)
    for job in Job.objects.filter(pk__in=job_ids):
        assert job.status == JobStatus.FINISHED, (job.status, job.error, cluster.output())
        assert job.final_result["text"] == "Finished before the stop."


def test_a_sigterm_ends_the_cluster_within_its_grace_and_hands_its_running_job_back(
    agent_client, runtime, start_cluster
):
    words = 300  # at 0.1 s a chunk the model would hold the job for 30 s
    runtime.script = lambda prompt, body: Reply(text="word " * words, chunk_delay=0.1)
    cluster = start_cluster(JOB_THREADS="4")
    job_id = start_job(agent_client)
    wait_for(
        lambda: Step.objects.filter(job_id=job_id, status=StepStatus.RUNNING).exists(),
        what="the model call to start",
    )
    asked = time.monotonic()
    cluster.process.terminate()  # SIGTERM to the cluster's main process, as a deploy does
    cluster.process.wait(timeout=30)
    stopped_in = time.monotonic() - asked
    assert stopped_in < 10, cluster.output()  # scripts/run.py's grace before SIGKILL
    job = Job.objects.get(pk=job_id)
    assert job.status == JobStatus.QUEUED  # handed back at once, not left to the reaper
    assert not job.steps.filter(status=StepStatus.RUNNING).exists()
    # The next cluster runs it to the end.
    runtime.script = lambda prompt, body: "Done after the restart."
    start_cluster()
    data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=cluster)
    assert data["final_result"]["text"] == "Done after the restart."
