"""Webhooks: events of a job POSTed to its webhook, signed per Standard Webhooks (verified
with the `standardwebhooks` package), retried, recorded, and never sent to an address a
webhook may not reach.

Jobs and deliveries run in django-q2's sync mode here (the task runs where it is sent);
tests/test_webhook_faults.py runs them in real clusters.
"""

from datetime import timedelta

import pytest
import standardwebhooks
from django.contrib.admin.utils import quote
from django.utils import timezone

from agents import webhook_client, webhooks
from agents.models import Job, WebhookAttempt, WebhookDelivery, WebhookSecret
from tests.envelope import assert_error
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db

START = "/agent/job/start"
TASK = {"source": "tests", "scope_type": "ticket", "scope_id": "T-1", "task": "Say hello."}


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def start(agent_client, sync_queue, runtime, django_capture_on_commit_callbacks):
    """Starts a job through the API and runs it, and its deliveries, inline."""
    runtime.script = lambda prompt, body: "Hello there."

    def run(**fields) -> str:
        with django_capture_on_commit_callbacks(execute=True):
            response = agent_client.post(START, {**TASK, **fields}, format="json")
        assert response.status_code == 200, response.content
        return response.json()["data"]["job_id"]

    return run


def secret_of(agent_client) -> str:
    return agent_client.get("/agent/webhooks/secret").json()["data"]["secret"]


def verified(secret: str, got) -> dict:
    return standardwebhooks.Webhook(secret).verify(got.body, got.headers)


def test_a_finished_job_posts_one_signed_event_with_what_its_status_shows(
    agent_client, start, receiver
):
    job_id = start(webhook=receiver.url)
    assert len(receiver.received) == 1
    got = receiver.received[0]
    event = verified(secret_of(agent_client), got)
    assert event["type"] == "job.finished"
    assert event["data"] == agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert event["data"]["final_result"]["text"] == "Hello there."
    assert got.headers["webhook-id"].startswith("msg_")
    assert got.headers["content-type"] == "application/json"
    delivery = WebhookDelivery.objects.get()
    assert delivery.pk == got.headers["webhook-id"]
    assert delivery.status == "delivered"
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code == 204 and attempt.error == "" and attempt.latency >= 0


def test_every_event_asked_for_is_sent_and_a_step_event_carries_the_step(
    agent_client, start, receiver
):
    events = ["running", "step", "finished", "failed", "cancelled"]
    job_id = start(webhook=receiver.url, webhook_events=events)
    secret = secret_of(agent_client)
    sent = [verified(secret, got) for got in receiver.received]
    types = [event["type"] for event in sent]
    assert types[0] == "job.running" and types[-1] == "job.finished"
    steps = [event["data"] for event in sent if event["type"] == "job.step"]
    shown = agent_client.get(f"/agent/job/{job_id}").json()["data"]["steps"]
    assert steps and {s["index"] for s in steps} == {s["index"] for s in shown}
    assert all(s["status"] != "running" for s in steps)
    ids = [got.headers["webhook-id"] for got in receiver.received]
    assert len(set(ids)) == len(ids)


def test_a_job_without_a_webhook_records_no_delivery(start, receiver):
    start()
    assert WebhookDelivery.objects.count() == 0
    assert receiver.received == []


def test_a_cancelled_queued_job_sends_cancelled(
    agent_client, receiver, settings, django_capture_on_commit_callbacks
):
    response = agent_client.post(START, {**TASK, "webhook": receiver.url}, format="json")
    job_id = response.json()["data"]["job_id"]  # queued: no worker runs here
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    with django_capture_on_commit_callbacks(execute=True):
        agent_client.post(f"/agent/job/{job_id}/cancel")
    event = verified(secret_of(agent_client), receiver.received[0])
    assert event["type"] == "job.cancelled"
    assert event["data"]["status"] == "cancelled"


def test_the_secret_is_made_on_first_use_and_stays(agent_client):
    first = agent_client.get("/agent/webhooks/secret")
    assert first.status_code == 200
    data = first.json()["data"]
    assert data["secret"].startswith("whsec_")
    assert data["previous_secret_signs_until"] is None
    assert agent_client.get("/agent/webhooks/secret").json()["data"] == data
    assert WebhookSecret.objects.count() == 1


def test_after_a_rotation_both_secrets_sign_for_24_hours(agent_client, start, receiver):
    old = secret_of(agent_client)
    rotated = agent_client.post("/agent/webhooks/secret/rotate").json()["data"]
    new = rotated["secret"]
    assert new != old and rotated["previous_secret_signs_until"]
    start(webhook=receiver.url)
    got = receiver.received[-1]
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    assert verified(old, got) == verified(new, got)
    WebhookSecret.objects.update(rotated_at=timezone.now() - timedelta(hours=25))
    start(webhook=receiver.url)
    got = receiver.received[-1]
    assert len(got.headers["webhook-signature"].split(" ")) == 1
    verified(new, got)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        verified(old, got)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "/relative/hook",
        "http:///no-host",
        "http://127.0.0.1/hook",
        "http://localhost:8000/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://224.0.0.1/hook",
        "http://0.0.0.0/hook",
        "http://100.64.0.1/hook",
        "http://example.com:99999/hook",
    ],
)
def test_a_webhook_that_may_not_be_reached_is_refused_at_the_start(agent_client, url):
    body = assert_error(
        agent_client.post(START, {**TASK, "webhook": url}, format="json"),
        400,
        "invalid_webhook_url",
    )
    assert body["details"]["webhook"] == url
    chat = {**TASK, "prompt": "Hi", "webhook": url}
    del chat["task"]
    assert_error(agent_client.post("/agent/chat", chat, format="json"), 400, "invalid_webhook_url")
    assert Job.objects.count() == 0


def test_webhook_events_must_be_known(agent_client, receiver):
    bad = agent_client.post(
        START, {**TASK, "webhook": receiver.url, "webhook_events": ["done"]}, format="json"
    )
    assert "webhook_events.0" in assert_error(bad, 400, "validation_error")["details"]["fields"]


def test_an_empty_list_of_events_sends_none(start, receiver):
    start(webhook=receiver.url, webhook_events=[])
    assert receiver.received == [] and WebhookDelivery.objects.count() == 0


def test_an_address_refused_when_connecting_is_a_failed_attempt(start, receiver, settings):
    """The URL was fine at the start; by the delivery its host resolves to loopback (as
    with DNS rebinding): no connection is made, the attempt fails."""
    settings.WEBHOOK_RETRY_SCHEDULE = []
    url = receiver.url.replace("127.0.0.1", "localhost")
    start_ok = start(webhook=url)  # allowed while WEBHOOK_ALLOW_PRIVATE is on
    assert start_ok and len(receiver.received) == 1
    settings.WEBHOOK_ALLOW_PRIVATE = False
    delivery = WebhookDelivery.objects.get()
    webhooks.webhook_send_again(delivery)
    assert webhooks.webhook_deliver(delivery.pk) == "failed"
    assert len(receiver.received) == 1
    attempt = WebhookAttempt.objects.get(delivery=delivery, number=2)
    assert attempt.status_code is None
    assert "loopback" in attempt.error


def test_redirects_are_not_followed(start, receiver, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = []
    receiver.answer = lambda got: (302, b"", {"Location": receiver.url + "/elsewhere"})
    start(webhook=receiver.url)
    assert [got.path for got in receiver.received] == ["/hook"]
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code == 302 and attempt.error == "HTTP 302"
    assert WebhookDelivery.objects.get().status == "failed"


def test_a_failed_attempt_is_retried_on_the_schedule_and_every_attempt_is_recorded(
    start, receiver, settings
):
    settings.WEBHOOK_RETRY_SCHEDULE = [0.0, 3600.0]
    answers = iter([(500, b"x" * 5000, {}), (204, b"", {})])
    receiver.answer = lambda got: next(answers)
    start(webhook=receiver.url)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert webhooks.webhook_sweep() == 1  # its pause (0 s) is over: sent again
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 2
    first, second = WebhookAttempt.objects.order_by("number")
    assert (first.status_code, first.error, len(first.response)) == (500, "HTTP 500", 1024)
    assert second.status_code == 204
    ids = {got.headers["webhook-id"] for got in receiver.received}
    assert ids == {delivery.pk}
    assert webhooks.webhook_sweep() == 0


def test_after_the_last_retry_the_delivery_is_failed(start, receiver, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = [0.0]
    receiver.answer = lambda got: (503, b"down", {})
    start(webhook=receiver.url)
    webhooks.webhook_sweep()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "failed" and delivery.attempts == 2
    assert delivery.next_attempt_at is None
    assert webhooks.webhook_sweep() == 0


def test_a_pause_not_over_yet_is_not_sent(start, receiver, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = [300.0]
    receiver.answer = lambda got: (500, b"", {})
    start(webhook=receiver.url)
    assert webhooks.webhook_sweep() == 0
    assert webhooks.webhook_deliver(WebhookDelivery.objects.get().pk) == "not due"
    assert len(receiver.received) == 1


def test_a_receiver_slower_than_the_limit_is_a_failed_attempt(
    start, receiver, settings, monkeypatch
):
    settings.WEBHOOK_RETRY_SCHEDULE = []
    monkeypatch.setattr(webhook_client, "TIMEOUT_SECONDS", 0.3)
    receiver.delay = 1.0
    start(webhook=receiver.url)
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code is None
    assert attempt.error.startswith("No answer within")
    assert attempt.latency < 1.0


def test_an_attempt_whose_worker_died_is_sent_again_once_its_lease_runs_out(
    start, receiver, settings
):
    receiver.answer = lambda got: (500, b"", {})
    settings.WEBHOOK_RETRY_SCHEDULE = [3600.0]
    start(webhook=receiver.url)
    delivery = WebhookDelivery.objects.get()
    # As a worker SIGKILLed after its claim leaves it: leased, attempt recorded, no outcome.
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=now, attempts=2, lease_until=now + timedelta(seconds=30)
    )
    WebhookAttempt.objects.create(
        delivery=delivery, number=2, started_at=now, error=webhooks.NO_OUTCOME
    )
    assert webhooks.webhook_sweep() == 0  # still leased
    receiver.answer = lambda got: (200, b"ok", {})
    WebhookDelivery.objects.filter(pk=delivery.pk).update(lease_until=now - timedelta(seconds=1))
    assert webhooks.webhook_sweep() == 1
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 3
    assert WebhookAttempt.objects.get(number=2).error == webhooks.NO_OUTCOME


def test_the_admin_shows_deliveries_with_their_attempts_and_sends_again(
    staff_client, start, receiver, sync_queue, django_capture_on_commit_callbacks
):
    job_id = start(webhook=receiver.url)
    delivery = WebhookDelivery.objects.get()
    listing = staff_client.get("/admin/agents/webhookdelivery/")
    assert listing.status_code == 200 and delivery.pk.encode() in listing.content
    # quote(): the admin reads "_3A" and the like in a URL's id as escapes
    page = staff_client.get(f"/admin/agents/webhookdelivery/{quote(delivery.pk)}/change/")
    assert page.status_code == 200 and b"204" in page.content
    job_page = staff_client.get(f"/admin/agents/job/{job_id}/change/")
    assert delivery.pk.encode() in job_page.content
    with django_capture_on_commit_callbacks(execute=True):
        done = staff_client.post(
            "/admin/agents/webhookdelivery/",
            {"action": "send_again", "_selected_action": [delivery.pk]},
            follow=True,
        )
    assert b"1 deliveries will be sent again." in done.content
    assert len(receiver.received) == 2
    assert {got.headers["webhook-id"] for got in receiver.received} == {delivery.pk}
    assert WebhookDelivery.objects.get().attempts == 2


def test_the_schema_documents_the_webhook_fields_and_endpoints(client):
    schema = client.get("/api/schema/?format=json").json()
    assert "/agent/webhooks/secret" in schema["paths"]
    assert "/agent/webhooks/secret/rotate" in schema["paths"]
    for name in ("JobStartRequest", "ChatRequest"):
        fields = schema["components"]["schemas"][name]["properties"]
        assert {"webhook", "webhook_events"} <= set(fields)
    on_busy = schema["components"]["schemas"]["ChatRequest"]["properties"]["on_busy"]
    assert on_busy["enum"] == ["enqueue", "reject", "interrupt"]
