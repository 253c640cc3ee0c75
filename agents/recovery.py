"""Jobs whose run stopped: a worker that died (the reaper), and a run cut off by a dropped
database connection (released at once by its own worker). Conditional updates, like every
state change of a job (``agents.services``).

A job put back goes to queued and is woken again while it has attempts left
(``JOB_MAX_ATTEMPTS``), else it fails with the reason; a cancelling one is cancelled. The
steps its run left running are failed, so that none shows ``running`` for ever.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents import events, webhooks
from agents.models import ACTIVE, Job, JobKind, JobStatus, Step, StepStatus
from agents.services import job_after_run, job_enqueue
from core import metrics

logger = logging.getLogger(__name__)

WORKER_DIED = "The worker running this job stopped responding"
CONNECTION_LOST = "The job's database connection was dropped"
WORKER_STOPPED = "The worker running this job was stopped"


def _close_abandoned_steps(job: Job, *, now: datetime, reason: str) -> None:
    """Fails the steps a stopped run left running (a late ``step_finish`` of that run then
    changes nothing); their events carry the number of the attempt that was lost."""
    for step in Step.objects.filter(job_id=job.pk, status=StepStatus.RUNNING):
        step.status, step.finished_at, step.output = StepStatus.FAILED, now, {"error": f"{reason}."}
        step.elapsed = round((now - step.started_at).total_seconds(), 3)
        if Step.objects.filter(pk=step.pk, status=StepStatus.RUNNING).update(
            status=step.status, finished_at=now, elapsed=step.elapsed, output=step.output
        ):
            events.step_emit(job, step, attempt=job.attempts)


@transaction.atomic
def _put_back(job: Job, lease: Q, *, now: datetime, reason: str) -> str | None:
    """Ends or re-queues ``job`` if ``lease`` still holds it; returns what was done."""
    released = {"lease_owner": "", "lease_expires_at": None}
    error = ""
    if job.status == JobStatus.CANCELLING:
        outcome = "cancelled"
        done = Job.objects.filter(lease, status=JobStatus.CANCELLING).update(
            status=JobStatus.CANCELLED, finished_at=now, **released
        )
    elif job.attempts >= settings.JOB_MAX_ATTEMPTS:
        outcome = "failed"
        error = (
            f"{reason} {job.attempts} time(s); giving up after "
            f"{settings.JOB_MAX_ATTEMPTS} attempts."
        )
        done = Job.objects.filter(lease, status=JobStatus.RUNNING).update(
            status=JobStatus.FAILED, finished_at=now, **released, error=error
        )
    else:
        outcome = "requeued"
        done = Job.objects.filter(lease, status=JobStatus.RUNNING).update(
            status=JobStatus.QUEUED, enqueued_at=now, **released
        )
    if not done:
        return None
    _close_abandoned_steps(job, now=now, reason=reason)
    if outcome == "requeued":
        events.status_emit(job, JobStatus.QUEUED)
        transaction.on_commit(lambda: job_enqueue(job.pk))
    else:
        job.status = outcome
        webhooks.webhook_emit(job, outcome)
        events.status_emit(job, outcome, error=error)
        metrics.JOBS.labels(job.kind, outcome).inc()
        job_after_run(job)
    return outcome


def job_release(job: Job, *, token: str, reason: str = CONNECTION_LOST) -> str | None:
    """Puts back a job whose run met a dropped database connection, or whose worker is
    stopping, at once rather than when its lease runs out; None if this worker no longer
    held it."""
    job.refresh_from_db(fields=["status", "attempts"])
    lease = Q(pk=job.pk, lease_owner=token)
    return _put_back(job, lease, now=timezone.now(), reason=reason)


def job_reap(*, now: datetime | None = None) -> dict[str, int]:
    """Recovers jobs whose worker died, and queued jobs whose wake-up was lost.

    A job whose lease expired is put back. A queued job that has waited longer than
    ``JOB_REWAKE_SECONDS`` since its last wake-up is woken again (duplicates are harmless:
    delivery only tries a claim).
    """
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "cancelled": 0, "rewoken": 0}
    expired = Job.objects.filter(status__in=ACTIVE, lease_expires_at__lt=now)
    for job in expired.only("pk", "status", "attempts", "lease_owner", "kind", "conversation_id"):
        lease = Q(pk=job.pk, lease_owner=job.lease_owner, lease_expires_at__lt=now)
        outcome = _put_back(job, lease, now=now, reason=WORKER_DIED)
        if outcome:
            counts[outcome] += 1
    if not _queue_is_empty():
        return counts  # a backlog is being worked off: its wake-ups are still on the way
    stale = now - timedelta(seconds=settings.JOB_REWAKE_SECONDS)
    busy_conversations = Job.objects.filter(kind=JobKind.CHAT, status__in=ACTIVE).values(
        "conversation_id"
    )
    for pk in (
        Job.objects.filter(status=JobStatus.QUEUED)
        .filter(Q(enqueued_at__lt=stale) | Q(enqueued_at__isnull=True, created_at__lt=stale))
        # A chat waiting behind a running one is woken when that one ends.
        .exclude(kind=JobKind.CHAT, conversation_id__in=busy_conversations)
        .values_list("pk", flat=True)
    ):
        counts["rewoken"] += 1
        transaction.on_commit(lambda pk=pk: job_enqueue(pk))
    return counts


def _queue_is_empty() -> bool:
    """Whether the broker holds no waiting message (then a stale queued job lost its own)."""
    from django_q.brokers import get_broker

    try:
        return get_broker().queue_size() == 0
    except Exception:  # a broker we cannot ask: wake anyway, duplicates are harmless
        logger.warning("Could not read the queue size; re-waking stale jobs anyway")
        return True
