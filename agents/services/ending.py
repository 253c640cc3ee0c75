"""Ending a job: finished, failed or cancelled by the worker that holds it, or cancelled
on request (the API, the admin), and then the next chat of its conversation woken."""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import events, webhooks
from agents.models import ACTIVE, Job, JobKind, JobStatus, Step, StepStatus
from agents.services.starts import job_enqueue
from agents.services.steps import step_finish
from core import metrics
from core.exceptions import JobNotCancellable
from core.http import storable


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
