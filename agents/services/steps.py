"""The steps of a running job: recorded by the worker that holds the job, ended once."""

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from agents import events, webhooks
from agents.models import ACTIVE, Job, Step, StepStatus
from agents.services.leases import LeaseLost


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


def step_mark_discarded(step: Step, *, reason: str) -> None:
    """The text of a model call is not what its job keeps (a chat's reply that was asked
    again or replaced): the step's output says why, and a ``step`` event tells the streams,
    whose clients take back the tokens they showed of it."""
    output = {**step.output, "discarded": reason}
    with transaction.atomic():
        if Step.objects.filter(pk=step.pk).update(output=output):
            step.output = output
            events.step_emit(step.job, step)
