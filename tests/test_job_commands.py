"""The management commands of jobs: ``reap_jobs`` and ``prune``."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents import services
from agents.models import TERMINAL, Job, JobStatus, Step, StepKind
from gateway.models import UsageRecord
from tests.factories import make_job

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def key(make_key):
    return make_key()[0]


def add_steps(job: Job, count: int) -> None:
    for index in range(count):
        Step.objects.create(
            job=job, index=index, kind=StepKind.NOTE, name="n", started_at=job.created_at
        )


def add_usage(key, *, days_ago: int) -> UsageRecord:
    record = UsageRecord.objects.create(api_key=key, model="m", status=200, elapsed=0.1)
    UsageRecord.objects.filter(pk=record.pk).update(
        created_at=timezone.now() - timedelta(days=days_ago)
    )
    return record


def test_reap_jobs_prints_what_it_did(key):
    dead = services.job_claim(make_job(key).pk, token="dead")
    Job.objects.filter(pk=dead.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert run("reap_jobs") == "requeued: 1, failed: 0, cancelled: 0, rewoken: 0"
    assert Job.objects.get(pk=dead.pk).status == JobStatus.QUEUED
    assert run("reap_jobs") == "requeued: 0, failed: 0, cancelled: 0, rewoken: 0"


@pytest.fixture
def history(key):
    """Three old ended jobs (3 steps), jobs that must stay, and usage old and new."""
    long_ago = timezone.now() - timedelta(days=40)
    old = [
        make_job(key, status=status, finished_at=long_ago)
        for status in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLED)
    ]
    add_steps(old[0], 2)
    add_steps(old[1], 1)
    recent = make_job(key, status=JobStatus.FINISHED)
    add_steps(recent, 1)
    waiting = make_job(key)  # created long ago but not over: never pruned
    running = make_job(key, status=JobStatus.RUNNING)
    Job.objects.filter(pk__in=[waiting.pk, running.pk]).update(created_at=long_ago)
    old_usage = [add_usage(key, days_ago=40), add_usage(key, days_ago=31)]
    new_usage = add_usage(key, days_ago=1)
    return {
        "old": old,
        "kept": [recent, waiting, running],
        "old_usage": old_usage,
        "new_usage": new_usage,
    }


def test_prune_deletes_ended_jobs_with_their_steps_and_old_usage(history):
    assert (
        run("prune", "--older-than", "30")
        == "Deleted: 3 jobs, 3 steps, 2 usage_records, 0 idempotency_keys"
    )
    assert set(Job.objects.values_list("pk", flat=True)) == {j.pk for j in history["kept"]}
    assert Step.objects.count() == 1
    assert list(UsageRecord.objects.values_list("pk", flat=True)) == [history["new_usage"].pk]
    assert (
        run("prune", "--older-than", "30")
        == "Deleted: 0 jobs, 0 steps, 0 usage_records, 0 idempotency_keys"
    )


def test_prune_dry_run_only_counts(history):
    out = run("prune", "--older-than", "30", "--dry-run")
    assert out == "Would delete: 3 jobs, 3 steps, 2 usage_records, 0 idempotency_keys"
    assert Job.objects.count() == 6
    assert Step.objects.count() == 4
    assert UsageRecord.objects.count() == 3


def test_prune_with_zero_days_deletes_every_ended_job(history):
    assert run("prune", "--older-than", "0").startswith("Deleted: 4 jobs, 4 steps, 3 usage")
    assert Job.objects.filter(status__in=TERMINAL).count() == 0


@pytest.mark.parametrize("args", [(), ("--older-than", "-1"), ("--older-than", "soon")])
def test_prune_refuses_a_missing_or_bad_age(args):
    with pytest.raises(CommandError):
        call_command("prune", *args, stdout=io.StringIO(), stderr=io.StringIO())
