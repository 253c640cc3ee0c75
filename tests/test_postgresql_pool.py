"""PostgreSQL connections of the web server: bounded by the pool however many model calls
are in flight. Collected only when the suite runs on PostgreSQL."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from tests.asgi import IN_FLIGHT, hold_slow_calls, post
from tests.factories import default_profile, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_database_connections_stay_within_the_pool_with_many_calls_in_flight(
    asgi_server, runtime, make_key, settings
):
    pool_size = settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]
    # Counted below: this process's connections, all from its pool of default (the tests
    # write usage records there). The pool of another alias that earlier tests used
    # (usage, which the pools' checker lets grow to its maximum) is closed first.
    for alias in connections:
        if alias != "default":
            connections[alias].close_pool()
    _, key = make_key()
    release = hold_slow_calls(runtime, settings)
    slow = {"api_key": key, "model": "test-model", "prompt": "slow"}
    with ThreadPoolExecutor(IN_FLIGHT) as clients:
        calls = [clients.submit(post, asgi_server, slow) for _ in range(IN_FLIGHT)]
        wait_for(lambda: len(runtime.generate_requests()) == IN_FLIGHT, what="calls in flight")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            )
            [open_connections] = cursor.fetchone()
        release.set()
        assert all(call.result()[0] == 200 for call in calls)
    assert IN_FLIGHT > pool_size >= open_connections


def test_a_worker_process_with_more_job_threads_than_connections_runs_them_all_at_once(
    agent_client, runtime, start_cluster
):
    """A job thread gives its connection back while the model generates: six jobs wait on
    the model at once in one worker process whose pool has three connections (a thread
    that kept its connection would leave the fourth waiting for one, never at the model)."""
    from tests.test_job_worker import start_job, wait_for_status

    default_profile()  # the jobs started through the API run with it
    release = threading.Event()

    def script(prompt: str, body: dict) -> str:
        release.wait(timeout=30)
        return "Done."

    runtime.script = script
    cluster = start_cluster(Q_WORKERS="1", JOB_THREADS="6", DB_POOL_MAX_SIZE="3")
    job_ids = [start_job(agent_client) for _ in range(6)]
    wait_for(lambda: len(runtime.generate_requests()) == 6, timeout=45, what="6 jobs in flight")
    release.set()
    for job_id in job_ids:
        data = wait_for_status(agent_client, job_id, "finished", "failed", cluster=cluster)
        assert data["status"] == "finished", data
