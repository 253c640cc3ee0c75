"""Webhooks: a job's events POSTed to its ``webhook``, signed per Standard Webhooks.

An event is recorded as a :class:`WebhookDelivery` in the transaction of the change it
tells of, and its delivery is a django-q2 task sent once that commits: never in the
request, never in the job's thread. Each attempt claims the delivery with a conditional
update and a lease, is recorded, and on failure the next one is due after the next pause
of ``WEBHOOK_RETRY_SCHEDULE``; after the last, the delivery is failed. A delivery whose
task was lost, or whose worker died during an attempt (its lease ran out), is sent again
by the sweep every worker process runs (:func:`webhook_sweep`): at least once, with the
same ``webhook-id`` on every attempt, so a receiver de-duplicates on it.
"""

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from agents import webhook_client
from agents.models import Job, Step
from agents.webhook_models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookSecret

logger = logging.getLogger(__name__)

EVENTS = ("running", "step", "finished", "failed", "cancelled")
DEFAULT_EVENTS = ("finished", "failed", "cancelled")
#: After a rotation, the previous secret signs too for this long.
ROTATION_OVERLAP = timedelta(hours=24)
#: An attempt in flight holds its delivery this long (past the receiver's time limit).
ATTEMPT_LEASE = timedelta(seconds=webhook_client.TIMEOUT_SECONDS + 20)
NO_OUTCOME = "No outcome: the worker stopped during the attempt."


# --- Secrets ------------------------------------------------------------------------------


def _new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_get(*, owner_id: int) -> WebhookSecret:
    """The owner's signing secret, created on first use."""
    found = WebhookSecret.objects.filter(owner_id=owner_id).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return WebhookSecret.objects.create(owner_id=owner_id, secret=_new_secret())
    except IntegrityError:  # a concurrent first use made it
        return WebhookSecret.objects.get(owner_id=owner_id)


@transaction.atomic
def secret_rotate(*, owner_id: int) -> WebhookSecret:
    """A new secret; the one it replaces signs too for :data:`ROTATION_OVERLAP`."""
    current = secret_get(owner_id=owner_id)
    row = WebhookSecret.objects.select_for_update().get(pk=current.pk)
    row.previous_secret, row.secret, row.rotated_at = row.secret, _new_secret(), timezone.now()
    row.save(update_fields=["previous_secret", "secret", "rotated_at"])
    return row


def previous_signs_until(row: WebhookSecret) -> datetime | None:
    if not row.previous_secret or row.rotated_at is None:
        return None
    until = row.rotated_at + ROTATION_OVERLAP
    return until if until > timezone.now() else None


def sign(*, msg_id: str, timestamp: int, body: bytes, keys: list[str]) -> str:
    """``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">`` per secret,
    space-separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    signatures = []
    for key in keys:
        raw = base64.b64decode(key.removeprefix("whsec_"))
        digest = hmac.new(raw, signed, hashlib.sha256).digest()
        signatures.append("v1," + base64.b64encode(digest).decode())
    return " ".join(signatures)


# --- Events -------------------------------------------------------------------------------


def wants(job: Job, event: str) -> bool:
    return bool(job.webhook) and event in (job.webhook_events or ())


def webhook_emit(job: Job, event: str, *, step: Step | None = None) -> None:
    """Records the event ``job.<event>`` for the job's webhook, if it asked for it, and
    sends its delivery once the transaction commits. ``data`` is the job as
    ``GET /agent/job/{id}`` shows it now (the step, for ``step``)."""
    if not wants(job, event):
        return
    from agents.serializers import JobDataSerializer, StepSerializer

    now = timezone.now()
    if step is not None:
        data = StepSerializer(step).data
    else:
        data = JobDataSerializer(Job.objects.select_related("profile").get(pk=job.pk)).data
    payload = {"type": f"job.{event}", "timestamp": now.isoformat(), "data": data}
    delivery = WebhookDelivery.objects.create(
        id=f"msg_{secrets.token_hex(12)}",
        job_id=job.pk,
        owner_id=job.owner_id,
        event=payload["type"],
        url=job.webhook,
        body=json.dumps(payload, cls=DjangoJSONEncoder, separators=(",", ":")),
        created_at=now,
        next_attempt_at=now,
        enqueued_at=now,
    )
    transaction.on_commit(lambda: _enqueue(delivery.pk))


def _enqueue(delivery_id: str) -> None:
    """Sends the delivery's task; a broker that fails leaves it to the sweep."""
    from django_q.tasks import async_task

    sync = settings.Q_CLUSTER.get("sync", False)
    try:
        async_task("agents.tasks.deliver_webhook", delivery_id, task_name=delivery_id, sync=sync)
    except Exception as exc:
        if sync:
            raise
        logger.warning("Webhook %s: not enqueued (%s); the sweep will send it", delivery_id, exc)


# --- Delivering ---------------------------------------------------------------------------


def webhook_deliver(delivery_id: str) -> str:
    """One attempt of a due delivery, if this call can claim it; returns what happened."""
    now = timezone.now()
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    claimed = (
        WebhookDelivery.objects.filter(free, pk=delivery_id, status=DeliveryStatus.PENDING)
        .filter(next_attempt_at__lte=now)
        .update(lease_until=now + ATTEMPT_LEASE, attempts=F("attempts") + 1)
    )
    if not claimed:
        return "not due"
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    attempt = WebhookAttempt.objects.create(
        delivery=delivery, number=delivery.attempts, started_at=now, error=NO_OUTCOME
    )
    outcome = webhook_client.post(
        delivery.url, body=delivery.body.encode(), headers=_headers(delivery)
    )
    WebhookAttempt.objects.filter(pk=attempt.pk).update(
        status_code=outcome.status_code,
        latency=round(outcome.latency, 4),
        error=outcome.error[:500],
        response=outcome.response,
    )
    return _after_attempt(delivery, ok=outcome.ok)


def _headers(delivery: WebhookDelivery) -> dict[str, str]:
    row = secret_get(owner_id=delivery.owner_id)
    keys = [row.secret] + ([row.previous_secret] if previous_signs_until(row) else [])
    timestamp = int(time.time())
    signature = sign(
        msg_id=delivery.pk, timestamp=timestamp, body=delivery.body.encode(), keys=keys
    )
    return {
        "Content-Type": "application/json",
        "User-Agent": "llmgw-webhooks",
        "webhook-id": delivery.pk,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


def _after_attempt(delivery: WebhookDelivery, *, ok: bool) -> str:
    now = timezone.now()
    mine = WebhookDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PENDING)
    if ok:
        mine.update(
            status=DeliveryStatus.DELIVERED,
            delivered_at=now,
            next_attempt_at=None,
            lease_until=None,
        )
        return "delivered"
    schedule = settings.WEBHOOK_RETRY_SCHEDULE
    if delivery.attempts > len(schedule):
        mine.update(status=DeliveryStatus.FAILED, next_attempt_at=None, lease_until=None)
        return "failed"
    pause = timedelta(seconds=schedule[delivery.attempts - 1])
    mine.update(next_attempt_at=now + pause, lease_until=None)
    return "retrying"


def webhook_sweep(*, limit: int = 500) -> int:
    """Sends the tasks of due deliveries that have none: a retry whose pause is over, an
    attempt whose worker died (its lease ran out), a task lost on the way (not run for
    ``JOB_REWAKE_SECONDS``). Returns how many were sent."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.JOB_REWAKE_SECONDS)
    waiting = Q(lease_until__isnull=True) & (
        Q(enqueued_at__lt=F("next_attempt_at")) | Q(enqueued_at__lt=stale)
    )
    due = Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now) & (
        waiting | Q(lease_until__lt=now)
    )
    sent = 0
    for pk in list(WebhookDelivery.objects.filter(due).values_list("pk", flat=True)[:limit]):
        if WebhookDelivery.objects.filter(due, pk=pk).update(enqueued_at=now, lease_until=None):
            _enqueue(pk)
            sent += 1
    return sent


def webhook_send_again(delivery: WebhookDelivery) -> None:
    """The admin's "send again": the delivery is pending again, due now, with the same
    ``webhook-id`` (a receiver that has it already may ignore it)."""
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.PENDING,
        next_attempt_at=now,
        enqueued_at=now,
        lease_until=None,
        delivered_at=None,
    )
    transaction.on_commit(lambda: _enqueue(delivery.pk))


def secret_view(row: WebhookSecret) -> dict[str, Any]:
    return {"secret": row.secret, "previous_secret_signs_until": previous_signs_until(row)}
