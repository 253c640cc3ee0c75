"""Every state change of a job or a step. Each is a conditional update.

A write carries the state it expects (``WHERE status IN (...)``) and, from a worker, the
lease it holds (``WHERE lease_owner = token``), and checks the row count. So two processes
can never both win, a terminal status never changes, and a worker that lost its lease
changes nothing.

Transitions: queued -> running -> finished | failed; queued -> cancelled;
running -> cancelling -> cancelled (or finished | failed when the work ended first);
running | cancelling -> queued (the reaper, after the worker's lease expired).
"""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from agents.models import ACTIVE, TERMINAL, Job, JobKind, JobStatus, Step, StepStatus
from gateway.errors import ApiError

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """This worker no longer holds the job (reaped, or finished elsewhere)."""


def _lease_until(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.JOB_LEASE_SECONDS)


# --- Creating and queueing -------------------------------------------------------------


def _send_wakeup(job_id: str) -> None:
    from django_q.tasks import async_task

    async_task(
        "agents.tasks.run_job", job_id, task_name=job_id, sync=settings.Q_CLUSTER.get("sync", False)
    )


def job_enqueue(job_id: str) -> None:
    """Sends the wake-up message for a job. Safe to repeat: delivery only tries a claim."""
    Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(enqueued_at=timezone.now())
    _send_wakeup(job_id)


def job_create(
    *,
    api_key,
    kind: str,
    source: str,
    scope_type: str,
    scope_id: str,
    profile,
    task: str = "",
    conversation=None,
) -> Job:
    """Creates a queued job; its wake-up is sent once the transaction commits."""
    job = Job.objects.create(
        owner_id=api_key.owner_id,
        api_key=api_key,
        kind=kind,
        source=source,
        scope_type=scope_type,
        scope_id=scope_id,
        task=task,
        profile=profile,
        conversation=conversation,
        # Stamped here rather than by job_enqueue: one write (and commit) less per start.
        enqueued_at=timezone.now(),
    )
    transaction.on_commit(lambda: _send_wakeup(job.pk))
    return job


# --- Claiming and holding ----------------------------------------------------------------


def _earlier_chat_waiting(job: Job) -> bool:
    return (
        Job.objects.filter(
            conversation_id=job.conversation_id,
            kind=JobKind.CHAT,
            status=JobStatus.QUEUED,
            created_at__lt=job.created_at,
        ).exists()
        or Job.objects.filter(
            conversation_id=job.conversation_id,
            kind=JobKind.CHAT,
            status__in=ACTIVE,
        ).exists()
    )


def job_claim(job_id: str, *, token: str) -> Job | None:
    """Takes a queued job for this worker, or None (taken, over, or not its turn yet).

    Chat jobs of one conversation run one at a time in arrival order: a chat is claimed
    only when no earlier one waits, and the database's partial unique index
    ``one_active_chat_per_conversation`` refuses a second active chat whatever happens.
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
                started_at=now,
                attempts=F("attempts") + 1,
            )
    except IntegrityError:
        return None  # another chat of this conversation is running
    if not claimed:
        return None
    return Job.objects.select_related("profile", "api_key").get(pk=job_id)


def job_heartbeat(job: Job, *, token: str) -> str:
    """Extends the lease and returns the job's status; raises LeaseLost if it is not ours."""
    now = timezone.now()
    held = Job.objects.filter(pk=job.pk, lease_owner=token, status__in=ACTIVE).update(
        heartbeat_at=now, lease_expires_at=_lease_until(now)
    )
    if not held:
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


# --- Steps -------------------------------------------------------------------------------


def step_start(
    job: Job, *, token: str, kind: str, name: str, input: dict[str, Any] | None = None
) -> Step:
    # One query: is the job still ours, and what is its last step's index?
    held = list(
        Job.objects.filter(pk=job.pk, lease_owner=token, status__in=ACTIVE)
        .annotate(last_index=Max("steps__index"))
        .values_list("last_index", flat=True)
    )
    if not held:
        raise LeaseLost(job.pk)
    index = held[0]
    try:
        return Step.objects.create(
            job=job,
            index=0 if index is None else index + 1,
            kind=kind,
            name=name,
            input=input or {},
            started_at=timezone.now(),
        )
    except IntegrityError as exc:  # another worker wrote this index: we lost the job
        raise LeaseLost(job.pk) from exc


def step_finish(
    step: Step, *, status: str = StepStatus.FINISHED, output: dict[str, Any] | None = None
) -> None:
    now = timezone.now()
    elapsed = round((now - step.started_at).total_seconds(), 3)
    Step.objects.filter(pk=step.pk, status=StepStatus.RUNNING).update(
        status=status, output=output or {}, finished_at=now, elapsed=elapsed
    )
    step.status, step.output, step.finished_at, step.elapsed = status, output or {}, now, elapsed


# --- Ending ------------------------------------------------------------------------------


def _end(job: Job, *, token: str, status: str, from_statuses, **fields) -> bool:
    now = timezone.now()
    ended = Job.objects.filter(pk=job.pk, lease_owner=token, status__in=from_statuses).update(
        status=status, finished_at=now, lease_owner="", lease_expires_at=None, **fields
    )
    if ended:
        job.status, job.finished_at = status, now
    return bool(ended)


def job_finish(job: Job, *, token: str, final_result: dict[str, Any]) -> bool:
    """running | cancelling -> finished (work that completed before a cancel counts)."""
    return _end(
        job, token=token, status=JobStatus.FINISHED, from_statuses=ACTIVE, final_result=final_result
    )


def job_fail(job: Job, *, token: str, error: str) -> bool:
    return _end(
        job, token=token, status=JobStatus.FAILED, from_statuses=ACTIVE, error=error[:10_000]
    )


def job_mark_cancelled(job: Job, *, token: str) -> bool:
    """The worker stopped a job whose cancel was requested: cancelling -> cancelled."""
    return _end(job, token=token, status=JobStatus.CANCELLED, from_statuses=(JobStatus.CANCELLING,))


def job_cancel(job: Job) -> str:
    """Asks a job to stop; returns its status. Finished or failed: 409 job_not_cancellable.

    queued -> cancelled at once; running -> cancelling (the worker ends it); cancelling and
    cancelled stay as they are. Used by the API and by the admin action.
    """
    now = timezone.now()
    for _ in range(3):  # the status may change under us; each round re-reads it
        job.refresh_from_db(fields=["status"])
        if job.status in (JobStatus.CANCELLING, JobStatus.CANCELLED):
            return job.status
        if job.status in (JobStatus.FINISHED, JobStatus.FAILED):
            raise ApiError(
                409,
                "job_not_cancellable",
                f"The job is {job.status} and cannot be cancelled.",
                details={"status": job.status, "job_id": job.pk},
            )
        if job.status == JobStatus.QUEUED:
            changed = Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
                status=JobStatus.CANCELLED, cancel_requested_at=now, finished_at=now
            )
            if changed:
                job.status = JobStatus.CANCELLED
                _wake_next_chat(job)
                return job.status
        elif Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLING, cancel_requested_at=now
        ):
            job.status = JobStatus.CANCELLING
            return job.status
    job.refresh_from_db(fields=["status"])
    return job.status


def _wake_next_chat(job: Job) -> None:
    """Sends the wake-up of the next queued chat of the job's conversation, if any."""
    if job.kind != JobKind.CHAT or job.conversation_id is None:
        return
    next_id = (
        Job.objects.filter(
            conversation_id=job.conversation_id, kind=JobKind.CHAT, status=JobStatus.QUEUED
        )
        .order_by("created_at")
        .values_list("pk", flat=True)
        .first()
    )
    if next_id:
        transaction.on_commit(lambda: job_enqueue(next_id))


def job_after_run(job: Job) -> None:
    _wake_next_chat(job)


# --- Recovering from dead workers -----------------------------------------------------------


def _close_abandoned_steps(job_id: str, *, now: datetime) -> None:
    """Fails the steps a dead worker left running, so that no step of a reaped job shows
    ``running`` for ever (and a late ``step_finish`` of that worker changes nothing)."""
    running = Step.objects.filter(job_id=job_id, status=StepStatus.RUNNING)
    for step in running.only("pk", "started_at"):
        Step.objects.filter(pk=step.pk, status=StepStatus.RUNNING).update(
            status=StepStatus.FAILED,
            finished_at=now,
            elapsed=round((now - step.started_at).total_seconds(), 3),
            output={"error": "The worker running this step stopped responding."},
        )


def job_reap(*, now: datetime | None = None) -> dict[str, int]:
    """Recovers jobs whose worker died, and queued jobs whose wake-up was lost.

    A running job whose lease expired goes back to queued (and is woken again) while it has
    attempts left, else it fails; a cancelling one is cancelled. A queued job that has
    waited longer than a lease since its last wake-up is woken again (duplicates are
    harmless: delivery only tries a claim).
    """
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "cancelled": 0, "rewoken": 0}
    expired = Job.objects.filter(status__in=ACTIVE, lease_expires_at__lt=now)
    for job in expired.only("pk", "status", "attempts", "lease_owner", "kind", "conversation_id"):
        lease = Q(pk=job.pk, lease_owner=job.lease_owner, lease_expires_at__lt=now)
        released = {"lease_owner": "", "lease_expires_at": None}
        if job.status == JobStatus.CANCELLING:
            if Job.objects.filter(lease, status=JobStatus.CANCELLING).update(
                status=JobStatus.CANCELLED, finished_at=now, **released
            ):
                counts["cancelled"] += 1
                _close_abandoned_steps(job.pk, now=now)
                _wake_next_chat(job)
        elif job.attempts >= settings.JOB_MAX_ATTEMPTS:
            if Job.objects.filter(lease, status=JobStatus.RUNNING).update(
                status=JobStatus.FAILED,
                finished_at=now,
                **released,
                error=(
                    f"The worker running this job stopped responding {job.attempts} "
                    f"time(s); giving up after {settings.JOB_MAX_ATTEMPTS} attempts."
                ),
            ):
                counts["failed"] += 1
                _close_abandoned_steps(job.pk, now=now)
                _wake_next_chat(job)
        elif Job.objects.filter(lease, status=JobStatus.RUNNING).update(
            status=JobStatus.QUEUED, enqueued_at=now, **released
        ):
            counts["requeued"] += 1
            _close_abandoned_steps(job.pk, now=now)
            transaction.on_commit(lambda pk=job.pk: job_enqueue(pk))
    if not _queue_is_empty():
        return counts  # a backlog is being worked off: its wake-ups are still on the way
    stale = now - timedelta(seconds=settings.JOB_LEASE_SECONDS)
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


def job_prune(*, older_than: datetime, dry_run: bool = False) -> dict[str, int]:
    """Deletes ended jobs (with their steps) and usage records from before ``older_than``."""
    from gateway.models import UsageRecord
    from gateway.ratelimit import prune_windows

    jobs = Job.objects.filter(status__in=TERMINAL, finished_at__lt=older_than)
    usage = UsageRecord.objects.filter(created_at__lt=older_than)
    counts = {
        "jobs": jobs.count(),
        "steps": Step.objects.filter(job__in=jobs).count(),
        "usage_records": usage.count(),
    }
    if not dry_run:
        with transaction.atomic():
            Step.objects.filter(job__in=jobs).delete()
            jobs.delete()
            usage.delete()
            prune_windows(before=timezone.now() - timedelta(minutes=5))
    return counts
