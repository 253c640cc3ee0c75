"""A worker's hold on a job: claiming it, renewing its lease, and checking it still holds
it. A claim is the conditional update ``queued -> running`` that writes the worker's token."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents import events, fairness, webhooks
from agents.models import ACTIVE, Job, JobKind, JobStatus
from agents.services.starts import job_enqueue
from core import metrics


class LeaseLost(Exception):
    """This worker no longer holds the job (reaped, or finished elsewhere)."""


def _lease_until(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.JOB_LEASE_SECONDS)


def _earlier_chat_waiting(job: Job) -> bool:
    """Whether an earlier chat of the job's conversation waits, or one runs (one read)."""
    return (
        Job.objects.filter(conversation_id=job.conversation_id, kind=JobKind.CHAT)
        .filter(Q(status=JobStatus.QUEUED, created_at__lt=job.created_at) | Q(status__in=ACTIVE))
        .exists()
    )


def job_claim(job_id: str, *, token: str) -> Job | None:
    """Takes a queued job for this worker, or None (taken, over, or not its turn yet).

    Chat jobs of one conversation run one at a time in arrival order: a chat is claimed
    only when no earlier one waits, and the database's partial unique index
    ``one_active_chat_per_conversation`` refuses a second active chat whatever happens.
    ``started_at`` stays the first attempt's start; ``attempts`` counts the claims.
    """
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status != JobStatus.QUEUED:
        return None
    if job.kind == JobKind.CHAT and _earlier_chat_waiting(job):
        return None
    now = timezone.now()
    try:
        with transaction.atomic():
            claimed = Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(
                status=JobStatus.RUNNING,
                lease_owner=token,
                lease_expires_at=_lease_until(now),
                heartbeat_at=now,
                started_at=Coalesce(F("started_at"), now),
                attempts=F("attempts") + 1,
            )
            if claimed:
                events.status_emit(job, JobStatus.RUNNING)
            if claimed and webhooks.wants(job, "running"):
                webhooks.webhook_emit(job, "running")
    except IntegrityError:
        return None  # another chat of this conversation is running
    if not claimed:
        return None
    if job.enqueued_at is not None:
        waited = (now - job.enqueued_at).total_seconds()
        metrics.JOB_QUEUE_WAIT.labels(job.kind).observe(max(0.0, waited))
    return Job.objects.select_related("profile", "api_key").get(pk=job_id)


def job_claim_next(delivered_id: str, *, token: str) -> Job | None:
    """What a wake-up claims: the fairest queued job that can run now (``agents.fairness``),
    else the job it was sent for, else None. A wake-up that took another job sends the
    one it was sent for again when that job is still queued and may run, so that no job
    is left without a wake-up on the way (a duplicate finds nothing, or the fairest)."""
    for job_id in dict.fromkeys((*fairness.candidates(), delivered_id)):
        job = job_claim(job_id, token=token)
        if job is not None:
            if job_id != delivered_id:
                job_enqueue(delivered_id)  # its own job, if still queued, keeps a wake-up
            return job
    return None


def job_renew_lease(job_id: str, *, token: str) -> bool:
    """Extends the lease of a job this worker holds; False if it holds it no more."""
    now = timezone.now()
    return bool(
        Job.objects.filter(pk=job_id, lease_owner=token, status__in=ACTIVE).update(
            heartbeat_at=now, lease_expires_at=_lease_until(now)
        )
    )


def job_renew_leases(leases: list[tuple[str, str]]) -> int:
    """Extends, in one statement, the leases ``(job id, token)`` this worker process holds;
    returns how many it still held."""
    if not leases:
        return 0
    held = Q()
    for job_id, token in leases:
        held |= Q(pk=job_id, lease_owner=token)
    now = timezone.now()
    return Job.objects.filter(held, status__in=ACTIVE).update(
        heartbeat_at=now, lease_expires_at=_lease_until(now)
    )


def job_heartbeat(job: Job, *, token: str) -> str:
    """Extends the lease and returns the job's status; raises LeaseLost if it is not ours."""
    if not job_renew_lease(job.pk, token=token):
        raise LeaseLost(job.pk)
    status = Job.objects.filter(pk=job.pk).values_list("status", flat=True).first()
    job.status = status
    return status


def job_status(job: Job, *, token: str) -> str:
    """The job's current status as this worker sees it; raises LeaseLost if not ours."""
    row = Job.objects.filter(pk=job.pk).values_list("status", "lease_owner").first()
    if row is None or row[1] != token or row[0] not in ACTIVE:
        raise LeaseLost(job.pk)
    job.status = row[0]
    return row[0]
