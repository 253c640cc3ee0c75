"""Reads of jobs, scoped to their owner."""

from collections.abc import Iterator
from typing import Any

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from agents.models import AgentProfile, Job, JobStatus
from core import ids
from core.exceptions import JobNotFound, UnknownProfile

# Texts longer than this are cut in API views of steps (never in storage).
VIEW_TEXT_LIMIT = 4000


def job_get_for_owner(*, job_id: str, owner_id: int) -> Job:
    """The job if it belongs to ``owner_id``; :class:`JobNotFound` otherwise (no leak)."""
    job = (
        Job.objects.filter(pk=job_id, owner_id=owner_id).select_related("profile").first()
        if ids.is_job_id(job_id)
        else None
    )
    if job is None:
        raise JobNotFound(job_id)
    return job


def profile_get(name: str | None) -> AgentProfile:
    """The named profile (``default`` when None); :class:`UnknownProfile` otherwise."""
    profile = AgentProfile.objects.filter(name=name or "default").first()
    if profile is None:
        raise UnknownProfile(name)
    return profile


def truncate(value: Any) -> Any:
    """``value`` with every text over VIEW_TEXT_LIMIT characters cut, for API views."""
    if isinstance(value, str) and len(value) > VIEW_TEXT_LIMIT:
        return value[:VIEW_TEXT_LIMIT] + f"… [{len(value) - VIEW_TEXT_LIMIT} more characters]"
    if isinstance(value, dict):
        return {k: truncate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [truncate(v) for v in value]
    return value


def job_counts_now() -> dict[str, int]:
    """Jobs queued, running and cancelling now (one grouped count)."""
    waiting = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.CANCELLING)
    counts = dict.fromkeys(waiting, 0)
    rows = Job.objects.filter(status__in=waiting).values_list("status").annotate(n=Count("pk"))
    counts.update(dict(rows.order_by()))
    return {str(status): n for status, n in counts.items()}


class JobGauge:
    """``llmgw_jobs``, read from the database at each scrape (``core.metrics``): the rows
    are the truth about jobs, whichever process or machine holds them."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "llmgw_jobs", "Jobs queued, running or cancelling now.", labels=("status",)
        )
        for status, count in job_counts_now().items():
            gauge.add_metric((status,), count)
        yield gauge
