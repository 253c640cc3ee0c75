"""Every PostgreSQL connection of the service terminated (``pg_terminate_backend``), idle and
under load: no request fails, and no job waits. Collected only when the suite runs on
PostgreSQL.

The production web server (gunicorn, 2 processes x 8 threads) and a qcluster with 2 workers
run on the test database; the test drives them over HTTP, terminates every connection to
the database but its own, and checks every answer, every usage record and every job.
"""

import threading
import time

import pytest
from django.db import connection

from agents.models import Job, JobStatus
from conversations.models import Message
from gateway.models import ApiKey, UsageRecord
from tests.factories import (
    default_profile,
    job_progress,
    recovery_seconds,
    wait_for,
    wait_while_moving,
)
from tests.live import request

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVICE = {"WEB_CONCURRENCY": "2", "GUNICORN_THREADS": "8", "Q_WORKERS": "2"}


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


@pytest.fixture
def service(start_web, start_cluster):
    """The web server and a cluster, warmed up: every web thread has used its connection."""
    web = start_web(**SERVICE)
    cluster = start_cluster(**SERVICE)
    return web, cluster


def terminate_every_connection() -> int:
    """Has the server drop every connection to the test database but this one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def model_calls(url: str, key: str, count: int) -> list[int]:
    """``count`` calls of /api.php at once; their statuses."""
    statuses: list[int] = [0] * count
    body = {"api_key": key, "model": "test-model", "prompt": "hi"}

    def call(index: int) -> None:
        statuses[index] = request(url, "POST", "/api.php", body)[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def chat(url: str, key: str, scope_id: str) -> str:
    body = {"source": "tests", "scope_type": "drop", "scope_id": scope_id, "prompt": scope_id}
    status, answer = request(url, "POST", "/agent/chat", body, key=key)
    assert status == 200, answer
    return answer["data"]["job_id"]


def wait_until_finished(url: str, key: str, job_ids: list[str], cluster) -> None:
    """Waits as long as the chats move (runs, steps, heartbeats) or may be on their way
    back to a worker: a chat cut by a drop is put back once its lease runs out and the
    reaper comes by. On a busy machine that takes longer, and the wait with it."""

    def finished() -> bool:
        statuses = [request(url, "GET", f"/agent/job/{j}", key=key) for j in job_ids]
        assert all(status == 200 for status, _ in statuses), statuses
        return all(answer["data"]["status"] == JobStatus.FINISHED for _, answer in statuses)

    try:
        wait_while_moving(
            finished,
            progress=lambda: job_progress(job_ids),
            still_for=recovery_seconds(),
            what="the chats to finish",
        )
    except AssertionError:
        print(cluster.output())
        raise


def assert_each_chat_answered_once(job_ids: list[str], *, later_drops: list[int] | None = None):
    """Each chat finished with one reply; a run cut by a drop runs again, so a chat runs at
    most once more than the drops that came after it started (``later_drops``, per job)."""
    later_drops = later_drops or [0] * len(job_ids)
    for job_id, drops in zip(job_ids, later_drops, strict=True):
        job = Job.objects.get(pk=job_id)
        roles = Message.objects.filter(conversation_id=job.conversation_id).order_by("seq")
        assert list(roles.values_list("role", flat=True)) == ["user", "assistant"]
        assert job.attempts <= 1 + drops, (job_id, job.attempts, drops)


def test_connections_terminated_while_idle_fail_no_request_and_delay_no_job(
    service, api_key, runtime
):
    web, cluster = service
    assert set(model_calls(web.url, api_key, 32)) == {200}
    wait_until_finished(web.url, api_key, [chat(web.url, api_key, "warm-up")], cluster)

    assert terminate_every_connection() > 0
    statuses = model_calls(web.url, api_key, 32)
    job_id = chat(web.url, api_key, "after-the-drop")
    wait_until_finished(web.url, api_key, [job_id], cluster)

    assert statuses == [200] * 32, web.output()
    assert UsageRecord.objects.filter(origin=UsageRecord.Origin.API).count() == 64
    assert_each_chat_answered_once([job_id])
    assert "Failed to pull task from broker" not in cluster.output()


ROUNDS = 3


def test_connections_terminated_under_load_fail_no_request_and_lose_no_job(
    service, api_key, runtime
):
    web, cluster = service
    body = {"api_key": api_key, "model": "test-model", "prompt": "hi"}
    statuses: list[int] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            statuses.append(request(web.url, "POST", "/api.php", body)[0])

    clients = [threading.Thread(target=client) for _ in range(16)]
    for thread in clients:
        thread.start()
    job_ids = []
    try:
        for round_ in range(ROUNDS):
            time.sleep(1)
            assert terminate_every_connection() > 0
            job_ids.append(chat(web.url, api_key, f"under-load-{round_}"))
        time.sleep(1)
    finally:
        stop.set()
        for thread in clients:
            thread.join(timeout=60)
    wait_until_finished(web.url, api_key, job_ids, cluster)

    failed = [status for status in statuses if status != 200]
    assert (len(statuses) > 100, failed) == (True, []), web.output()
    assert UsageRecord.objects.filter(origin=UsageRecord.Origin.API).count() == len(statuses)
    # A drop can cut a chat while it runs: it runs again, once per later drop at most.
    assert_each_chat_answered_once(job_ids, later_drops=[ROUNDS - 1 - i for i in range(ROUNDS)])
    assert "Failed to pull task from broker" not in cluster.output()


def test_a_job_whose_connections_are_dropped_while_the_model_generates_finishes_on_new_ones(
    api_key, runtime
):
    """The job thread holds no connection while it waits on the model; the pool checks the
    one it hands out next, so the drop costs the job nothing: no failure, no second run."""
    from agents import tasks
    from tests.factories import InThread, make_job
    from tests.runtime_server import Reply

    runtime.script = lambda prompt, body: Reply(text="word " * 60, chunk_delay=0.05)
    job = make_job(ApiKey.objects.get())
    worker = InThread(tasks.run_job, job.pk)
    wait_for(lambda: runtime.generate_requests(), what="the model call")
    assert terminate_every_connection() > 0
    assert worker.join() == JobStatus.FINISHED
    job.refresh_from_db()
    assert (job.status, job.lease_owner, job.attempts) == (JobStatus.FINISHED, "", 1)
    assert job.final_result["text"] == ("word " * 60).strip()
    assert [s.status for s in job.steps.all()] == ["finished"]
