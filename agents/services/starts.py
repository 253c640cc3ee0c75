"""Creating a job and sending its wake-up: the starts of the API and of the chats."""

import functools
import logging
import time

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import events, fairness, webhooks
from agents.models import ACTIVE, Job, JobKind, JobStatus
from agents.selectors import profile_get
from core import requestid, tracing
from core.db import run_again_if_dropped_at_commit
from core.exceptions import TooManyJobs
from core.ids import new_job_id
from gateway.budgets import budget_check
from gateway.models import ApiKey

logger = logging.getLogger(__name__)


#: A broker that fails (Redis restarting) is asked again after these pauses, in seconds.
WAKEUP_RETRY_DELAYS = (0.2, 0.5, 1.0)


def _broker():
    """The broker of django-q2's configuration, one per process: django-q2 makes a new one
    per message otherwise, and with it a new Redis client that connects again. A client
    reconnects by itself after Redis restarts and is safe to share between threads (the
    database broker uses the ORM)."""
    from django_q.conf import Conf

    return _broker_of(Conf.BROKER_CLASS, Conf.CLUSTER_NAME, str(Conf.REDIS), Conf.ORM)


@functools.cache
def _broker_of(*configuration):
    """One broker per configuration: the arguments are the cache's key, get_broker() reads
    the same settings from Conf."""
    from django_q.brokers import get_broker

    return get_broker()


def _send_wakeup(job_id: str) -> None:
    """Puts the job's wake-up on the queue. A broker that stays away longer than the retries
    loses it: the job is committed and queued, and the reaper wakes it again later."""
    from django_q.tasks import async_task

    sync = settings.Q_CLUSTER.get("sync", False)
    for delay in (*WAKEUP_RETRY_DELAYS, None):
        try:
            async_task(
                "agents.tasks.run_job", job_id, task_name=job_id, sync=sync, broker=_broker()
            )
            return
        except Exception as exc:
            if sync:
                raise  # the task itself ran here and failed: not the broker
            if delay is None:
                logger.error("Job %s: wake-up not sent (%s); the reaper will send it", job_id, exc)
                return
            logger.warning("Job %s: wake-up failed (%s); trying again", job_id, exc)
            time.sleep(delay)


def job_enqueue(job_id: str) -> None:
    """Sends the wake-up message for a job that is still queued (one already claimed or
    over needs none). Safe to repeat: delivery only tries a claim."""
    if Job.objects.filter(pk=job_id, status=JobStatus.QUEUED).update(enqueued_at=timezone.now()):
        _send_wakeup(job_id)


def _require_room_for_a_job(api_key) -> None:
    """The key's jobs queued or running stay under its ``max_active_jobs``. The key's row is
    locked first (PostgreSQL), so that concurrent starts of one key count one at a time."""
    limit = api_key.max_active_jobs
    if not limit:
        return
    ApiKey.objects.select_for_update().filter(pk=api_key.pk).first()
    waiting_or_running = (JobStatus.QUEUED, *ACTIVE)
    if Job.objects.filter(api_key_id=api_key.pk, status__in=waiting_or_running).count() >= limit:
        raise TooManyJobs(limit=limit)


def job_create(
    *,
    api_key,
    kind: str,
    source: str,
    scope_type: str,
    scope_id: str,
    profile,
    task: str = "",
    conversation=None,
    job_id: str | None = None,
    webhook: str = "",
    webhook_events: list[str] | None = None,
) -> Job:
    """Creates a queued job; its wake-up is sent once the transaction commits. ``job_id``
    is the id chosen beforehand by a caller that must be able to find the job again.
    ``webhook`` receives the job's ``webhook_events`` (default: the terminal ones).
    Raises :class:`TooManyJobs` when the key has ``max_active_jobs`` queued or running."""
    budget_check(api_key)
    _require_room_for_a_job(api_key)
    job = Job.objects.create(
        id=job_id or new_job_id(),
        owner_id=api_key.owner_id,
        api_key=api_key,
        kind=kind,
        source=source,
        scope_type=scope_type,
        scope_id=scope_id,
        task=task,
        profile=profile,
        conversation=conversation,
        # Stamped here rather than by job_enqueue: one write (and commit) less per start.
        enqueued_at=timezone.now(),
        webhook=webhook,
        webhook_events=list(webhooks.DEFAULT_EVENTS if webhook_events is None else webhook_events)
        if webhook
        else [],
        request_id=requestid.current(),
        trace_context=tracing.traceparent(),
        fair_key=fairness.fair_key(api_key.owner_id),
    )
    events.status_emit(job, JobStatus.QUEUED, first=True)
    transaction.on_commit(lambda: _send_wakeup(job.pk))
    return job


def job_committed(job_id: str) -> Job | None:
    """After a commit whose answer the connection lost: the job if it was committed, with
    its wake-up sent (the lost commit ran no ``on_commit``), else None."""
    job = Job.objects.select_related("conversation").filter(pk=job_id).first()
    if job is not None:
        _send_wakeup(job.pk)
    return job


def task_start(
    *,
    api_key,
    source: str,
    scope_type: str,
    scope_id: str,
    task: str,
    profile_name: str | None,
    webhook: str = "",
    webhook_events: list[str] | None = None,
) -> Job:
    """Starts a task job with the named profile (the default when None). Returns once the
    job is committed and its wake-up sent: the transaction ends before the return. A
    dropped connection, even one that cut the commit, starts the job once."""
    profile = profile_get(profile_name)
    job_id = new_job_id()

    def start() -> Job:
        with transaction.atomic():
            return job_create(
                api_key=api_key,
                kind=JobKind.TASK,
                source=source,
                scope_type=scope_type,
                scope_id=scope_id,
                task=task,
                profile=profile,
                job_id=job_id,
                webhook=webhook,
                webhook_events=webhook_events,
            )

    return run_again_if_dropped_at_commit(start, committed=lambda: job_committed(job_id))
