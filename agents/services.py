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
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents import events, fairness, webhooks
from agents.models import (
    ACTIVE,
    TERMINAL,
    IdempotencyKey,
    Job,
    JobEvent,
    JobKind,
    JobStatus,
    Step,
    StepStatus,
)
from agents.selectors import profile_get
from core import metrics, requestid, tracing
from core.db import run_again_if_dropped_at_commit
from core.exceptions import JobNotCancellable, TooManyJobs
from core.http import storable
from core.ids import new_job_id
from gateway import services as gateway_services
from gateway.budgets import budget_check
from gateway.models import ApiKey

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """This worker no longer holds the job (reaped, or finished elsewhere)."""


def _lease_until(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.JOB_LEASE_SECONDS)


# --- Creating and queueing -------------------------------------------------------------


#: A broker that fails (Redis restarting) is asked again after these pauses, in seconds.
WAKEUP_RETRY_DELAYS = (0.2, 0.5, 1.0)


def _send_wakeup(job_id: str) -> None:
    """Puts the job's wake-up on the queue. A broker that stays away longer than the retries
    loses it: the job is committed and queued, and the reaper wakes it again later."""
    from django_q.tasks import async_task

    sync = settings.Q_CLUSTER.get("sync", False)
    for delay in (*WAKEUP_RETRY_DELAYS, None):
        try:
            async_task("agents.tasks.run_job", job_id, task_name=job_id, sync=sync)
            return
        except Exception as exc:
            if sync:
                raise  # the task itself ran here and failed: not the broker
            if delay is None:
                logger.error("Job %s: wake-up not sent (%s); the reaper will send it", job_id, exc)
                return
            logger.warning("Job %s: wake-up failed (%s); trying again", job_id, exc)
            time.sleep(delay)


def job_enqueue(job_id: str) -> None:
    """Sends the wake-up message for a job. Safe to repeat: delivery only tries a claim."""
    Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(enqueued_at=timezone.now())
    _send_wakeup(job_id)


def _require_room_for_a_job(api_key) -> None:
    """The key's jobs queued or running stay under its ``max_active_jobs``. The key's row is
    locked first (PostgreSQL), so that concurrent starts of one key count one at a time."""
    limit = api_key.max_active_jobs
    if not limit:
        return
    ApiKey.objects.select_for_update().filter(pk=api_key.pk).first()
    waiting_or_running = (JobStatus.QUEUED, *ACTIVE)
    if Job.objects.filter(api_key_id=api_key.pk, status__in=waiting_or_running).count() >= limit:
        raise TooManyJobs(limit=limit)


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
    job_id: str | None = None,
    webhook: str = "",
    webhook_events: list[str] | None = None,
) -> Job:
    """Creates a queued job; its wake-up is sent once the transaction commits. ``job_id``
    is the id chosen beforehand by a caller that must be able to find the job again.
    ``webhook`` receives the job's ``webhook_events`` (default: the terminal ones).
    Raises :class:`TooManyJobs` when the key has ``max_active_jobs`` queued or running."""
    budget_check(api_key)
    _require_room_for_a_job(api_key)
    job = Job.objects.create(
        id=job_id or new_job_id(),
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
        webhook=webhook,
        webhook_events=list(webhooks.DEFAULT_EVENTS if webhook_events is None else webhook_events)
        if webhook
        else [],
        request_id=requestid.current(),
        trace_context=tracing.traceparent(),
        fair_key=fairness.fair_key(api_key.owner_id),
    )
    events.status_emit(job, JobStatus.QUEUED, first=True)
    transaction.on_commit(lambda: _send_wakeup(job.pk))
    return job


def job_committed(job_id: str) -> Job | None:
    """After a commit whose answer the connection lost: the job if it was committed, with
    its wake-up sent (the lost commit ran no ``on_commit``), else None."""
    job = Job.objects.select_related("conversation").filter(pk=job_id).first()
    if job is not None:
        _send_wakeup(job.pk)
    return job


def task_start(
    *,
    api_key,
    source: str,
    scope_type: str,
    scope_id: str,
    task: str,
    profile_name: str | None,
    webhook: str = "",
    webhook_events: list[str] | None = None,
) -> Job:
    """Starts a task job with the named profile (the default when None). Returns once the
    job is committed and its wake-up sent: the transaction ends before the return. A
    dropped connection, even one that cut the commit, starts the job once."""
    profile = profile_get(profile_name)
    job_id = new_job_id()

    def start() -> Job:
        with transaction.atomic():
            return job_create(
                api_key=api_key,
                kind=JobKind.TASK,
                source=source,
                scope_type=scope_type,
                scope_id=scope_id,
                task=task,
                profile=profile,
                job_id=job_id,
                webhook=webhook,
                webhook_events=webhook_events,
            )

    return run_again_if_dropped_at_commit(start, committed=lambda: job_committed(job_id))


# --- Claiming and holding ----------------------------------------------------------------


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
                _pass_on(delivered_id)
            return job
    return None


def _pass_on(job_id: str) -> None:
    job = Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).first()
    if job is not None and not (job.kind == JobKind.CHAT and _earlier_chat_waiting(job)):
        job_enqueue(job_id)


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


# --- Steps -------------------------------------------------------------------------------


def step_start(
    job: Job,
    *,
    token: str,
    kind: str,
    name: str,
    input: dict[str, Any] | None = None,
    finished: bool = False,
) -> Step:
    """Records a running step of a job this worker holds (LeaseLost if it does not); with
    ``finished``, a step that is over as it is recorded (a note), in the same one write."""
    # One query: is the job still ours, and what is its last step's index?
    held = list(
        Job.objects.filter(pk=job.pk, lease_owner=token, status__in=ACTIVE)
        .annotate(last_index=Max("steps__index"))
        .values_list("last_index", flat=True)
    )
    if not held:
        raise LeaseLost(job.pk)
    index = held[0]
    now = timezone.now()
    over = {"status": StepStatus.FINISHED, "finished_at": now, "elapsed": 0.0} if finished else {}
    try:
        with transaction.atomic():
            step = Step.objects.create(
                job=job,
                index=0 if index is None else index + 1,
                kind=kind,
                name=name,
                input=input or {},
                started_at=now,
                **over,
            )
            events.step_emit(job, step)
            if finished:
                webhooks.webhook_emit(job, "step", step=step)
            return step
    except IntegrityError as exc:  # another worker wrote this index: we lost the job
        raise LeaseLost(job.pk) from exc


def step_finish(
    step: Step, *, status: str = StepStatus.FINISHED, output: dict[str, Any] | None = None
) -> None:
    now = timezone.now()
    elapsed = round((now - step.started_at).total_seconds(), 3)
    with transaction.atomic():
        ended = Step.objects.filter(pk=step.pk, status=StepStatus.RUNNING).update(
            status=status, output=output or {}, finished_at=now, elapsed=elapsed
        )
        step.status, step.output, step.finished_at, step.elapsed = (
            status,
            output or {},
            now,
            elapsed,
        )
        if ended:
            events.step_emit(step.job, step)
            webhooks.webhook_emit(step.job, "step", step=step)


# --- Ending ------------------------------------------------------------------------------


def _end(job: Job, *, token: str, status: str, from_statuses, **fields) -> bool:
    now = timezone.now()
    with transaction.atomic():
        ended = Job.objects.filter(pk=job.pk, lease_owner=token, status__in=from_statuses).update(
            status=status, finished_at=now, lease_owner="", lease_expires_at=None, **fields
        )
        if ended:
            job.status, job.finished_at = status, now
            _end_open_steps(job)
            metrics.JOBS.labels(job.kind, status).inc()
            webhooks.webhook_emit(job, status)
            events.status_emit(job, status, **fields)  # the job's last event
    return bool(ended)


def _end_open_steps(job: Job) -> None:
    """A step still running when its job ended (its own end could not be written) ends
    with the job, so that no step of an ended job ever reads ``running``."""
    status = StepStatus.CANCELLED if job.status == JobStatus.CANCELLED else StepStatus.FAILED
    for step in Step.objects.filter(job_id=job.pk, status=StepStatus.RUNNING):
        step_finish(step, status=status, output={"error": "The job ended before this step did."})


def job_finish(job: Job, *, token: str, final_result: dict[str, Any]) -> bool:
    """running | cancelling -> finished (work that completed before a cancel counts)."""
    return _end(
        job, token=token, status=JobStatus.FINISHED, from_statuses=ACTIVE, final_result=final_result
    )


def job_fail(job: Job, *, token: str, error: str) -> bool:
    """The job failed with ``error`` (which may quote what the model or runtime said)."""
    return _end(
        job,
        token=token,
        status=JobStatus.FAILED,
        from_statuses=ACTIVE,
        error=storable(error[:10_000]),
    )


def job_mark_cancelled(job: Job, *, token: str) -> bool:
    """The worker stopped a job whose cancel was requested: cancelling -> cancelled."""
    return _end(job, token=token, status=JobStatus.CANCELLED, from_statuses=(JobStatus.CANCELLING,))


def job_cancel(job: Job) -> str:
    """Asks a job to stop; returns its status. Finished or failed: :class:`JobNotCancellable`.

    queued -> cancelled at once; running -> cancelling (the worker ends it); cancelling and
    cancelled stay as they are. Used by the API and by the admin action.
    """
    now = timezone.now()
    for _ in range(3):  # the status may change under us; each round re-reads it
        job.refresh_from_db(fields=["status"])
        if job.status in (JobStatus.CANCELLING, JobStatus.CANCELLED):
            return job.status
        if job.status in (JobStatus.FINISHED, JobStatus.FAILED):
            raise JobNotCancellable(job_id=job.pk, status=job.status)
        if job.status == JobStatus.QUEUED:
            with transaction.atomic():
                changed = Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(
                    status=JobStatus.CANCELLED, cancel_requested_at=now, finished_at=now
                )
                if changed:
                    job.status = JobStatus.CANCELLED
                    webhooks.webhook_emit(job, JobStatus.CANCELLED)
                    events.status_emit(job, JobStatus.CANCELLED)
            if changed:
                metrics.JOBS.labels(job.kind, job.status).inc()
                _wake_next_chat(job)
                return job.status
        elif _mark_cancelling(job, now=now):
            return job.status
    job.refresh_from_db(fields=["status"])
    return job.status


def _mark_cancelling(job: Job, *, now: datetime) -> bool:
    """running -> cancelling (the worker ends the job); False if it was not running."""
    with transaction.atomic():
        if not Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
            status=JobStatus.CANCELLING, cancel_requested_at=now
        ):
            return False
        job.status = JobStatus.CANCELLING
        events.status_emit(job, JobStatus.CANCELLING)
    return True


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


def job_prune(*, older_than: datetime, dry_run: bool = False) -> dict[str, int]:
    """Deletes ended jobs (with their steps and events) from before ``older_than``, the
    gateway's usage records of that age (``gateway.services.usage_prune``), and the
    Idempotency-Keys past their ``IDEMPOTENCY_TTL``, in one transaction."""
    jobs = Job.objects.filter(status__in=TERMINAL, finished_at__lt=older_than)
    keys = IdempotencyKey.objects.filter(expires_at__lte=timezone.now())
    counts = {"jobs": jobs.count(), "steps": Step.objects.filter(job__in=jobs).count()}
    with transaction.atomic():
        if not dry_run:
            Step.objects.filter(job__in=jobs).delete()
            JobEvent.objects.filter(job__in=jobs).delete()
            jobs.delete()
        counts.update(gateway_services.usage_prune(older_than=older_than, dry_run=dry_run))
        counts["idempotency_keys"] = keys.count()
        if not dry_run:
            keys.delete()
    return counts
