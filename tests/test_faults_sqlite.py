"""SQLite under the production web server and two workers for a minute: no client ever sees
"database is locked", and every job and message is stored once. Collected only when the
suite runs on SQLite.

``TEST_SOAK_SECONDS`` (default 60) sets how long the load lasts.
"""

import os
import threading
import time

import pytest

from agents.models import TERMINAL, Job, JobStatus
from conversations.models import Message
from gateway.models import UsageRecord
from tests.factories import default_profile, wait_for
from tests.live import request

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SOAK_SECONDS = float(os.environ.get("TEST_SOAK_SECONDS", "60"))


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


def test_sqlite_under_the_web_server_and_two_workers_never_answers_database_is_locked(
    start_web, start_cluster, api_key, runtime
):
    web = start_web(WEB_CONCURRENCY="2", GUNICORN_THREADS="8")
    cluster = start_cluster(Q_WORKERS="2")
    answers: list[tuple[str, int, str]] = []  # (what, status, body) of every answer
    chats: dict[str, list[str]] = {}  # conversation -> its jobs, in order
    deadline = time.monotonic() + SOAK_SECONDS

    def record(what: str, status: int, body: object) -> object:
        answers.append((what, status, str(body)))
        return body

    def model_caller() -> None:
        body = {"api_key": api_key, "model": "test-model", "prompt": "hi"}
        while time.monotonic() < deadline:
            record("api.php", *request(web.url, "POST", "/api.php", body))

    def chatter(scope_id: str) -> None:
        body = {"source": "soak", "scope_type": "t", "scope_id": scope_id, "prompt": "hello"}
        while time.monotonic() < deadline:
            started = record("chat", *request(web.url, "POST", "/agent/chat", body, key=api_key))
            if not isinstance(started, dict) or not started.get("ok"):
                continue
            job_id = started["data"]["job_id"]
            chats.setdefault(started["data"]["conversation_id"], []).append(job_id)
            while time.monotonic() < deadline + 30:
                status = record(
                    "job", *request(web.url, "GET", f"/agent/job/{job_id}", key=api_key)
                )
                if isinstance(status, dict) and status.get("data", {}).get("status") in TERMINAL:
                    break
                time.sleep(0.05)

    threads = [threading.Thread(target=model_caller) for _ in range(6)]
    threads += [threading.Thread(target=chatter, args=(f"soak-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=SOAK_SECONDS + 60)

    locked = [a for a in answers if "locked" in a[2]]
    failed = [a for a in answers if a[1] != 200]
    assert (locked, failed[:5]) == ([], [])
    job_ids = [job for jobs in chats.values() for job in jobs]
    wait_for(
        lambda: Job.objects.filter(pk__in=job_ids, status__in=TERMINAL).count() == len(job_ids),
        what="every chat to end",
    )
    assert set(Job.objects.filter(pk__in=job_ids).values_list("status", flat=True)) == {
        JobStatus.FINISHED
    }, cluster.output()
    for conversation, jobs in chats.items():
        roles = Message.objects.filter(conversation_id=conversation).order_by("seq")
        assert list(roles.values_list("role", flat=True)) == ["user", "assistant"] * len(jobs)
    calls = sum(1 for what, _, _ in answers if what == "api.php")
    assert UsageRecord.objects.filter(origin=UsageRecord.Origin.API).count() == calls
    print(f"soak: {calls} model calls and {len(job_ids)} chats in {SOAK_SECONDS:g} s")
