"""The dashboard's numbers, each computed by the database with a bounded result.

Every figure is an aggregate grouped by day (or model, or status) in SQL: no query returns
more rows than days x series, and no Python loop runs over usage records or jobs. Percentiles
use the nearest-rank method with window functions (``ROW_NUMBER`` and ``COUNT`` partitioned
by model), which SQLite and PostgreSQL both run.
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q, Sum, Value, Window
from django.db.models.functions import Coalesce, RowNumber, TruncDate
from django.utils import timezone

from agents.models import Job, JobStatus
from gateway.models import UsageRecord
from gateway.selectors import budgets_now

DAYS = 30
# The per-key chart shows the busiest keys of the period; the rest are summed as "others".
TOP_KEYS = 6
# A call ended by its client (a cancelled job) is not an error of the service.
CANCELLED_STATUS = 499
ERROR = Q(status__gte=400) & ~Q(status=CANCELLED_STATUS)
TOKENS = Coalesce(Sum("prompt_tokens"), 0) + Coalesce(Sum("completion_tokens"), 0)


@dataclass(frozen=True)
class Period:
    """The last ``days`` calendar days (UTC), today included."""

    first_day: date
    days: int

    @classmethod
    def ending_today(cls, days: int = DAYS, *, now: datetime | None = None) -> "Period":
        today = timezone.localdate(now or timezone.now())
        return cls(first_day=today - timedelta(days=days - 1), days=days)

    @property
    def start(self) -> datetime:
        return timezone.make_aware(datetime.combine(self.first_day, datetime.min.time()))

    @property
    def labels(self) -> list[str]:
        return [(self.first_day + timedelta(days=n)).isoformat() for n in range(self.days)]


def _series(period: Period, rows: list[dict[str, Any]], field: str) -> list[int]:
    """One value per day of the period, 0 where the database returned no row."""
    by_day = {row["day"].isoformat(): row[field] or 0 for row in rows}
    return [by_day.get(day, 0) for day in period.labels]


def _usage_by_day(period: Period, **filters: Any):
    return (
        UsageRecord.objects.filter(created_at__gte=period.start, **filters)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(calls=Count("id"), errors=Count("id", filter=ERROR), tokens=TOKENS)
        .order_by("day")
    )


def usage_per_day(period: Period) -> dict[str, list[int]]:
    """Calls, errors and tokens (prompt + completion) per day, over every key."""
    rows = list(_usage_by_day(period))
    return {name: _series(period, rows, name) for name in ("calls", "errors", "tokens")}


def usage_per_day_per_key(period: Period, *, top: int = TOP_KEYS) -> list[dict[str, Any]]:
    """The busiest ``top`` keys of the period, each with calls, errors and tokens per day.

    Two queries: the top keys by calls, then their per-day figures grouped by key and day
    (at most ``top`` x days rows).
    """
    busiest = list(
        UsageRecord.objects.filter(created_at__gte=period.start)
        .values("api_key_id", "api_key__name", "api_key__prefix")
        .annotate(calls=Count("id"))
        .order_by("-calls", "api_key_id")[:top]
    )
    if not busiest:
        return []
    rows = list(
        UsageRecord.objects.filter(
            created_at__gte=period.start, api_key_id__in=[k["api_key_id"] for k in busiest]
        )
        .annotate(day=TruncDate("created_at"))
        .values("api_key_id", "day")
        .annotate(calls=Count("id"), errors=Count("id", filter=ERROR), tokens=TOKENS)
        .order_by()
    )
    keys = []
    for key in busiest:
        own = [row for row in rows if row["api_key_id"] == key["api_key_id"]]
        series = {name: _series(period, own, name) for name in ("calls", "errors", "tokens")}
        keys.append(
            {
                "id": key["api_key_id"],
                "name": f"{key['api_key__name']} ({key['api_key__prefix']})",
                **series,
                "totals": {name: sum(values) for name, values in series.items()},
            }
        )
    return keys


def usage_by_origin(period: Period) -> list[dict[str, Any]]:
    """Calls, errors and tokens of the period per face (``/api.php``, the OpenAI-compatible
    ``/v1/``) and of the agents' own calls: one row per origin that has calls."""
    labels = dict(UsageRecord.Origin.choices)
    rows = (
        UsageRecord.objects.filter(created_at__gte=period.start)
        .values("origin")
        .annotate(calls=Count("id"), errors=Count("id", filter=ERROR), tokens=TOKENS)
        .order_by("origin")
    )
    return [{**row, "label": labels.get(row["origin"], row["origin"])} for row in rows]


def elapsed_percentiles(period: Period) -> list[dict[str, Any]]:
    """p50 and p95 of ``elapsed`` (seconds) per model over the period's successful calls.

    Nearest rank: the p-th percentile of n sorted values is the value at rank ceil(p * n),
    written in integer arithmetic so that both databases compute the same rank. The query
    returns at most two rows per model.
    """
    n = F("n")
    ranked = (
        UsageRecord.objects.filter(created_at__gte=period.start, status=200)
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("model")], order_by=F("elapsed").asc()),
            n=Window(Count("id"), partition_by=[F("model")]),
        )
        .filter(
            Q(rank=(n + Value(1)) / Value(2)) | Q(rank=(n * Value(95) + Value(99)) / Value(100))
        )
        .values_list("model", "rank", "n", "elapsed")
    )
    found: dict[str, dict[str, Any]] = {}
    for model, rank, count, elapsed in ranked:
        entry = found.setdefault(model, {"model": model, "calls": count})
        if rank == (count + 1) // 2:
            entry["p50"] = elapsed
        if rank == (count * 95 + 99) // 100:
            entry["p95"] = elapsed
    return sorted(found.values(), key=lambda entry: entry["model"])


def jobs_by_status() -> dict[str, int]:
    """How many jobs are in each status now (every status listed, 0 included)."""
    counts = dict(
        Job.objects.values_list("status")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("status", "n")
    )
    return {status: counts.get(status, 0) for status in JobStatus.values}


def jobs_per_day(period: Period) -> dict[str, list[int]]:
    """Jobs created per day, by their status now."""
    rows = list(
        Job.objects.filter(created_at__gte=period.start)
        .annotate(day=TruncDate("created_at"))
        .values("day", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return {
        status: _series(period, [r for r in rows if r["status"] == status], "n")
        for status in JobStatus.values
    }


def queue_state(*, now: datetime | None = None) -> dict[str, Any]:
    """Queued jobs: how many, and the oldest one with its age in seconds."""
    queued = Job.objects.filter(status=JobStatus.QUEUED)
    oldest = queued.order_by("created_at").values("pk", "created_at").first()
    now = now or timezone.now()
    return {
        "depth": queued.count(),
        "oldest_id": oldest["pk"] if oldest else None,
        "oldest_created_at": oldest["created_at"] if oldest else None,
        "oldest_age_seconds": (now - oldest["created_at"]).total_seconds() if oldest else None,
    }


def dashboard(*, now: datetime | None = None) -> dict[str, Any]:
    """Everything the admin index shows."""
    period = Period.ending_today(now=now)
    return {
        "days": period.labels,
        "usage": usage_per_day(period),
        "keys": usage_per_day_per_key(period),
        "origins": usage_by_origin(period),
        "latency": elapsed_percentiles(period),
        "jobs_now": jobs_by_status(),
        "jobs_per_day": jobs_per_day(period),
        "queue": queue_state(now=now),
        "budgets": budgets_now(now=now),
    }
