"""Runs one delivered job: claim it, run its agent, end it in exactly one terminal state."""

import logging
import os
import socket
import time
import uuid
from typing import Any

from django.db import connection

from agents import kinds, recovery, services, worker
from agents.actions import Steps
from agents.context import AgentFailure, JobCancelled, JobContext, JobInterrupted
from agents.models import Job
from core import metrics, requestid, tracing
from core.db import is_connection_loss
from core.errors import error_id
from core.exceptions import DomainError

logger = logging.getLogger(__name__)


def new_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def claim(job_id: str) -> tuple[Job, str] | None:
    """Claims, for a new lease token, the fairest queued job that can run now, which need
    not be ``job_id`` (``agents.fairness``); None when there is none (a duplicate or late
    delivery finds its job claimed or over, a chat waits for the earlier one)."""
    token = new_token()
    job = services.job_claim_next(job_id, token=token)
    return None if job is None else (job, token)


def run_job(job_id: str) -> str:
    """Runs the job this delivery claims (the fairest that can run, see :func:`claim`);
    returns what happened (for the queue log). A duplicate or late delivery that finds
    nothing to claim returns at once.
    """
    claimed = claim(job_id)
    if claimed is None:
        return "not claimed"
    return run_claimed(*claimed)


def run_claimed(job: Job, token: str) -> str:
    """Runs a job this worker claimed with ``token`` and ends it in one terminal state, with
    its request's id and its own bound to every log line and model call of the run, in
    the span of the run (child of the request's, when traces are on)."""
    started = time.perf_counter()
    with (
        requestid.bound(request=job.request_id, job=job.pk),
        tracing.span("job.run", parent=job.trace_context, **{"job.kind": job.kind}) as span,
    ):
        logger.info("Job %s: running (%s, attempt %d)", job.pk, job.kind, job.attempts)
        outcome = _run_claimed(job, token)
        tracing.set_attributes(span, **{"job.status": job.status})
        logger.info("Job %s: %s", job.pk, outcome)
    metrics.JOB_RUN.labels(job.kind).observe(time.perf_counter() - started)
    return outcome


def drive(ctx: JobContext, steps: Steps) -> Any:
    """Runs an agent's steps (``agents.actions``): carries out and records each request
    and sends its answer back; what stopped a request is thrown back into the agent, which
    may handle it. Returns what the agent returns."""
    answer: object = None
    error: Exception | None = None
    while True:
        try:
            action = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value
        answer, error = None, None
        try:
            answer = ctx.perform(action)
        except Exception as exc:  # the agent's to handle; unhandled, it ends the job below
            error = exc


def _run_claimed(job: Job, token: str) -> str:
    job_id = job.pk
    ctx = JobContext(job, token)
    try:
        with worker.holding(job.pk, token):
            result = drive(ctx, kinds.agent_for(job.kind)(job, token))
    except JobCancelled:
        services.job_mark_cancelled(job, token=token)
    except JobInterrupted:
        logger.info("Job %s: its worker is stopping; handing it back to the queue", job_id)
        return recovery.job_release(job, token=token, reason=recovery.WORKER_STOPPED) or "lost"
    except services.LeaseLost:
        logger.warning("Job %s: lease lost; another worker owns it now", job_id)
        return "lease lost"
    except AgentFailure as exc:
        services.job_fail(job, token=token, error=str(exc))
    except DomainError as exc:
        services.job_fail(job, token=token, error=f"{error_id(exc)}: {exc.message}")
    except Exception as exc:
        if is_connection_loss(exc):
            # Nothing wrong with the job: it runs again at once, on a new connection.
            logger.warning("Job %s: its database connection was dropped; putting it back", job_id)
            connection.close()
            return recovery.job_release(job, token=token) or "lease lost"
        logger.exception("Job %s crashed", job_id)
        services.job_fail(job, token=token, error=f"internal_error: {type(exc).__name__}: {exc}")
    else:
        if not services.job_finish(job, token=token, final_result=result):
            logger.warning("Job %s: finished work, but the job was no longer ours", job_id)
    finally:
        services.job_after_run(job)
    return job.status
