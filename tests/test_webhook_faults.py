"""Webhooks against faults, with real qclusters (tests/live.py): a receiver down for a while
and then up again, a worker SIGKILLed during deliveries. At the receiver, after
de-duplication on ``webhook-id``, every event arrives once: none lost. Collected on
PostgreSQL, as the other fault tests."""

import json
import socket
import time

import pytest

from agents import webhooks
from agents.models import Job, JobStatus, WebhookAttempt, WebhookDelivery
from tests.factories import default_profile, wait_for
from tests.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: Retries within seconds (the mechanism is the schedule's, whatever its pauses).
FAST = {
    "WEBHOOK_ALLOW_PRIVATE": "1",
    "WEBHOOK_RETRY_SCHEDULE": "0.5,0.5,1,1,2,2,2,2,2,2",
    "JOB_REAP_SECONDS": "0.5",
    "JOB_HEARTBEAT_SECONDS": "0.5",
    "JOB_LEASE_SECONDS": "2",
}


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_jobs(agent_client, url: str, count: int) -> list[str]:
    ids = []
    for n in range(count):
        body = {
            "source": "tests",
            "scope_type": "hook",
            "scope_id": str(n),
            "task": "Say hi.",
            "webhook": url,
            "webhook_events": ["running", "finished"],
        }
        response = agent_client.post("/agent/job/start", body, format="json")
        assert response.status_code == 200, response.content
        ids.append(response.json()["data"]["job_id"])
    return ids


def assert_every_event_arrived_once(receiver: WebhookReceiver, job_ids: list[str]) -> None:
    by_id: dict[str, dict] = {}
    for got in receiver.received:
        event = json.loads(got.body)
        seen = by_id.setdefault(got.headers["webhook-id"], event)
        assert seen == event  # a retry carries the same event
    expected = {(job_id, kind) for job_id in job_ids for kind in ("job.running", "job.finished")}
    arrived = [(event["data"]["job_id"], event["type"]) for event in by_id.values()]
    assert sorted(arrived) == sorted(expected)
    stored = set(WebhookDelivery.objects.values_list("pk", flat=True))
    assert stored == set(by_id)


def test_a_receiver_down_then_up_gets_every_event_once_per_webhook_id(
    agent_client, start_cluster, runtime, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"  # nothing listens yet
    start_cluster(**FAST)
    job_ids = start_jobs(agent_client, url, 10)
    wait_for(
        lambda: Job.objects.filter(status=JobStatus.FINISHED).count() == 10,
        timeout=60,
        what="the jobs to finish",
    )
    wait_for(  # every delivery's first attempt, not 20 attempts of some of them
        lambda: WebhookAttempt.objects.filter(number=1).exclude(error="").count() >= 20,
        timeout=30,
        what="every first attempt to fail while the receiver is down",
    )
    assert WebhookDelivery.objects.filter(status="delivered").count() == 0
    receiver = WebhookReceiver().start(port=port)
    try:
        wait_for(
            lambda: WebhookDelivery.objects.filter(status="delivered").count() == 20,
            timeout=60,
            what="every delivery to arrive",
        )
        time.sleep(1)  # anything sent twice would arrive now
        assert_every_event_arrived_once(receiver, job_ids)
        assert WebhookDelivery.objects.exclude(status="delivered").count() == 0
        failed_first = WebhookAttempt.objects.filter(number=1).exclude(error="").count()
        assert failed_first == 20
    finally:
        receiver.stop()


def test_a_worker_killed_during_deliveries_leaves_them_to_be_sent_again(
    agent_client, start_cluster, runtime, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    receiver = WebhookReceiver().start()
    receiver.delay = 3.0  # deliveries in flight when the worker dies
    try:
        cluster = start_cluster(**FAST)
        job_ids = start_jobs(agent_client, receiver.url, 4)
        wait_for(
            lambda: Job.objects.filter(status=JobStatus.FINISHED).count() == 4,
            timeout=60,
            what="the jobs to finish",
        )
        in_flight = WebhookAttempt.objects.filter(error=webhooks.NO_OUTCOME)
        wait_for(lambda: in_flight.exists(), timeout=30, what="an attempt in flight")
        cluster.kill()  # its attempts' leases run out; the next cluster's sweep sends again
        receiver.delay = 0.0
        start_cluster(**FAST)
        wait_for(
            lambda: (
                Job.objects.filter(status=JobStatus.FINISHED).count() == 4
                and WebhookDelivery.objects.filter(status="delivered").count() == 8
            ),
            timeout=90,
            what="every job to finish and every delivery to arrive",
        )
        time.sleep(1)
        assert_every_event_arrived_once(receiver, job_ids)
    finally:
        receiver.stop()
