"""Reads of jobs, scoped to their owner."""

from typing import Any

from agents.models import AgentProfile, Job, Step
from gateway.errors import ApiError

# Texts longer than this are cut in API views of steps (never in storage).
VIEW_TEXT_LIMIT = 4000


def job_get_for_owner(*, job_id: str, owner_id: int) -> Job:
    """The job if it belongs to ``owner_id``; 404 ``job_not_found`` otherwise (no leak)."""
    job = Job.objects.filter(pk=job_id, owner_id=owner_id).first()
    if job is None:
        raise ApiError(404, "job_not_found", "No job with this id.", details={"job_id": job_id})
    return job


def profile_get(name: str | None) -> AgentProfile:
    """The named profile (``default`` when None); 400 ``unknown_profile`` otherwise."""
    profile = AgentProfile.objects.filter(name=name or "default").first()
    if profile is None:
        raise ApiError(
            400, "unknown_profile", f"No agent profile named {name!r}.", details={"profile": name}
        )
    return profile


def _truncate(value: Any) -> Any:
    if isinstance(value, str) and len(value) > VIEW_TEXT_LIMIT:
        return value[:VIEW_TEXT_LIMIT] + f"… [{len(value) - VIEW_TEXT_LIMIT} more characters]"
    if isinstance(value, dict):
        return {k: _truncate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncate(v) for v in value]
    return value


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def step_view(step: Step) -> dict[str, Any]:
    return {
        "index": step.index,
        "kind": step.kind,
        "name": step.name,
        "status": step.status,
        "started_at": _iso(step.started_at),
        "finished_at": _iso(step.finished_at),
        "elapsed": step.elapsed,
        "input": _truncate(step.input),
        "output": _truncate(step.output),
    }


def job_view(job: Job) -> dict[str, Any]:
    """The ``data`` of ``GET /agent/job/{id}``."""
    data: dict[str, Any] = {
        "job_id": job.pk,
        "status": job.status,
        "kind": job.kind,
        "source": job.source,
        "scope_type": job.scope_type,
        "scope_id": job.scope_id,
        "profile": job.profile.name,
        "attempts": job.attempts,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "steps": [step_view(s) for s in job.steps.order_by("index")],
    }
    if job.conversation_id:
        data["conversation_id"] = job.conversation_id
    if job.final_result is not None:
        data["final_result"] = job.final_result
    if job.error:
        data["error"] = job.error
    return data
