"""Deleting what has aged out: ended jobs, the gateway's usage records, Idempotency-Keys."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agents.models import TERMINAL, IdempotencyKey, Job, JobEvent, Step
from gateway import services as gateway_services


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
