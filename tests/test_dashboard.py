"""The dashboard's selectors: per-day figures and percentiles computed by the database."""

import math
import random
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Job, JobStatus
from backoffice import selectors
from gateway.models import UsageRecord
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def _usage(api_key, *, days_ago: int = 0, **fields) -> UsageRecord:
    values = {"model": "test-model", "status": 200, "elapsed": 0.5, **fields}
    record = UsageRecord.objects.create(api_key=api_key, **values)
    created = timezone.now() - timedelta(days=days_ago)
    UsageRecord.objects.filter(pk=record.pk).update(created_at=created)
    return record


def _nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(p * len(ordered)) - 1]


def test_calls_errors_and_tokens_are_counted_per_day(make_key):
    api_key, _ = make_key()
    _usage(api_key, prompt_tokens=3, completion_tokens=4)
    _usage(api_key, status=502, error="runtime_unavailable")
    _usage(api_key, status=499, error="cancelled")
    _usage(api_key, days_ago=2, prompt_tokens=10, completion_tokens=None)
    _usage(api_key, days_ago=31)

    period = selectors.Period.ending_today()
    usage = selectors.usage_per_day(period)

    assert len(usage["calls"]) == 30
    assert usage["calls"][-1] == 3 and usage["calls"][-3] == 1
    assert usage["errors"][-1] == 1  # a cancelled call is not an error
    assert usage["tokens"][-1] == 7 and usage["tokens"][-3] == 10
    assert sum(usage["calls"]) == 4  # the 31-day-old call is outside the period


def test_the_busiest_keys_come_first_with_their_own_figures(make_key):
    quiet, _ = make_key(name="quiet")
    busy, _ = make_key(name="busy")
    _usage(quiet)
    for _ in range(3):
        _usage(busy, status=500, error="internal_error")

    keys = selectors.usage_per_day_per_key(selectors.Period.ending_today())

    assert [key["id"] for key in keys] == [busy.pk, quiet.pk]
    assert keys[0]["totals"] == {"calls": 3, "errors": 3, "tokens": 0}
    assert keys[1]["calls"][-1] == 1


@pytest.mark.parametrize("count", [1, 2, 7, 20, 101])
def test_p50_and_p95_are_the_nearest_rank_values_per_model(make_key, count):
    api_key, _ = make_key()
    rng = random.Random(count)
    fast = [round(rng.uniform(0.01, 1.0), 3) for _ in range(count)]
    slow = [round(rng.uniform(2.0, 9.0), 3) for _ in range(3)]
    for elapsed in fast:
        _usage(api_key, model="fast", elapsed=elapsed)
    for elapsed in slow:
        _usage(api_key, model="slow", elapsed=elapsed)
    _usage(api_key, model="fast", elapsed=99.0, status=504, error="runtime_timeout")

    rows = selectors.elapsed_percentiles(selectors.Period.ending_today())

    assert rows == [
        {
            "model": "fast",
            "calls": count,
            "p50": _nearest_rank(fast, 0.5),
            "p95": _nearest_rank(fast, 0.95),
        },
        {
            "model": "slow",
            "calls": 3,
            "p50": _nearest_rank(slow, 0.5),
            "p95": _nearest_rank(slow, 0.95),
        },
    ]


def test_jobs_are_counted_by_status_now_and_per_day(make_key):
    api_key, _ = make_key()
    make_job(api_key)
    make_job(api_key, status=JobStatus.RUNNING)
    old = make_job(api_key, status=JobStatus.FAILED)
    Job.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=1))

    period = selectors.Period.ending_today()
    assert selectors.jobs_by_status() == {
        "queued": 1,
        "running": 1,
        "cancelling": 0,
        "finished": 0,
        "failed": 1,
        "cancelled": 0,
    }
    per_day = selectors.jobs_per_day(period)
    assert per_day["queued"][-1] == 1 and per_day["running"][-1] == 1
    assert per_day["failed"][-2] == 1 and per_day["failed"][-1] == 0


def test_the_queue_shows_its_depth_and_oldest_job(make_key):
    api_key, _ = make_key()
    assert selectors.queue_state()["depth"] == 0
    first = make_job(api_key)
    Job.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    make_job(api_key)
    make_job(api_key, status=JobStatus.FINISHED)

    queue = selectors.queue_state()

    assert queue["depth"] == 2
    assert queue["oldest_id"] == first.pk
    assert 290 < queue["oldest_age_seconds"] < 400


def test_the_dashboard_costs_the_same_queries_with_ten_times_the_rows(make_key):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            selectors.dashboard()
        return len(captured)

    keys = [make_key(name=f"k{n}")[0] for n in range(8)]
    for n, api_key in enumerate(keys):
        _usage(api_key, days_ago=n)
        make_job(api_key)
    few = queries()
    for n in range(9):
        for api_key in keys:
            _usage(api_key, days_ago=n, model=f"m{n % 3}")
            make_job(api_key, status=JobStatus.FINISHED)
    assert queries() == few


def test_the_dashboard_tells_the_two_faces_and_the_agents_apart(make_key):
    api_key, _ = make_key()
    _usage(api_key, origin=UsageRecord.Origin.API, prompt_tokens=1, completion_tokens=1)
    _usage(api_key, origin=UsageRecord.Origin.OPENAI, prompt_tokens=2, completion_tokens=3)
    _usage(api_key, origin=UsageRecord.Origin.OPENAI, status=502, error="runtime_unavailable")
    _usage(api_key, origin=UsageRecord.Origin.AGENT)
    rows = selectors.usage_by_origin(selectors.Period.ending_today())
    assert [(r["label"], r["calls"], r["errors"], r["tokens"]) for r in rows] == [
        ("Agent", 1, 0, 0),
        ("/api.php", 1, 0, 2),
        ("/v1/ (OpenAI-compatible)", 2, 1, 5),
    ]
