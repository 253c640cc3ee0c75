"""Runs one delivered job: claim it, run its agent, end it in exactly one terminal state."""

import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

from agents import services
from agents.context import AgentFailure, JobCancelled, JobContext
from agents.models import JobKind
from gateway.errors import ApiError

logger = logging.getLogger(__name__)

AGENTS: dict[str, str] = {
    JobKind.TASK: "agents.task_agent.run_task",
    JobKind.CHAT: "conversations.chat_agent.run_chat",
}


def _agent_for(kind: str) -> Callable[[JobContext], dict[str, Any]]:
    return import_string(AGENTS[kind])


def new_token() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def run_job(job_id: str) -> str:
    """Runs the job if this delivery can claim it; returns what happened (for the queue log).

    A duplicate or late delivery finds the job claimed or over and returns at once.
    """
    token = new_token()
    job = services.job_claim(job_id, token=token)
    if job is None:
        return "not claimed"
    ctx = JobContext(job, token)
    try:
        result = _agent_for(job.kind)(ctx)
    except JobCancelled:
        services.job_mark_cancelled(job, token=token)
    except services.LeaseLost:
        logger.warning("Job %s: lease lost; another worker owns it now", job_id)
        return "lease lost"
    except AgentFailure as exc:
        services.job_fail(job, token=token, error=str(exc))
    except ApiError as exc:
        services.job_fail(job, token=token, error=f"{exc.error}: {exc.message}")
    except Exception as exc:
        logger.exception("Job %s crashed", job_id)
        services.job_fail(job, token=token, error=f"internal_error: {type(exc).__name__}: {exc}")
    else:
        if not services.job_finish(job, token=token, final_result=result):
            logger.warning("Job %s: finished work, but the job was no longer ours", job_id)
    finally:
        services.job_after_run(job)
    return job.status
