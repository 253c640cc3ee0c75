"""What every worker process runs beside its jobs: the lease heartbeat and the reaper.

One daemon thread per django-q2 worker process, started when the process is spawned. Every
``JOB_HEARTBEAT_SECONDS`` it renews, in one statement, the leases of the jobs the process is
running (one, or up to ``JOB_THREADS``: ``agents.jobthreads``), whatever each job is doing
(a model call that has not sent its first token, a tokenizer waiting behind another
generation, a slow tool), so the lease can be short; every ``JOB_REAP_SECONDS`` it runs the
reaper, so a job whose worker died is put back soon after its lease ran out, not at the
next minute of the schedule.

The heartbeat is guarded by the lease token like every other write of a worker: a process
that was stalled (stopped, swapped out) for longer than the lease finds, when it resumes,
its job re-queued or run by another worker, and its renewals, like its other writes,
change nothing. A job held for longer than ``JOB_TIMEOUT`` is renewed no more: its lease
runs out and the reaper takes it over, as django-q2's timeout would have killed a process
stuck in it (a job thread cannot be killed; whatever it writes later is refused).
"""

import contextlib
import logging
import multiprocessing
import multiprocessing.util
import random
import threading
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError, connections

from agents import recovery, services, webhooks
from core.db import release_pooled_connections

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# Set JOB_STOP_GRACE seconds after this worker process began to exit (its cluster is
# stopping): the jobs still running then hand themselves back to the queue at their next
# check instead of holding the exit up.
stopping = threading.Event()
# The jobs this process runs: lease token -> (job id, monotonic time of the claim).
_held: dict[str, tuple[str, float]] = {}
_started = False


@contextlib.contextmanager
def holding(job_id: str, token: str) -> Iterator[None]:
    """The heartbeat renews the lease of ``job_id`` while the block runs."""
    with _lock:
        _held[token] = (job_id, time.monotonic())
    try:
        yield
    finally:
        with _lock:
            _held.pop(token, None)


def held_jobs() -> list[str]:
    """Ids of the jobs this process runs now."""
    with _lock:
        return [job_id for job_id, _ in _held.values()]


def beat() -> None:
    """One heartbeat: renews the leases of the held jobs, if any, in one statement."""
    too_old = time.monotonic() - settings.JOB_TIMEOUT
    with _lock:
        leases = [(job_id, token) for token, (job_id, since) in _held.items() if since > too_old]
        overdue = len(_held) - len(leases)
    if overdue:
        logger.warning("%d job(s) ran past JOB_TIMEOUT; their leases are left to expire", overdue)
    if leases and services.job_renew_leases(leases) < len(leases):
        # A job ended meanwhile, or this process lost it: its own next write finds out.
        logger.debug("Heartbeat: not every lease was renewed (ended, or no longer ours)")


def reap() -> None:
    counts = recovery.job_reap()
    if any(counts.values()):
        logger.info("Reaper: %s", counts)
    sent = webhooks.webhook_sweep()
    if sent:
        logger.info("Webhook sweep: %d delivery task(s) sent", sent)


def _loop() -> None:
    # Reapers of several processes are spread out rather than all at the same instant.
    next_reap = time.monotonic() + random.uniform(0, settings.JOB_REAP_SECONDS)
    while True:
        time.sleep(settings.JOB_HEARTBEAT_SECONDS)
        try:
            beat()
            if time.monotonic() >= next_reap:
                next_reap = time.monotonic() + settings.JOB_REAP_SECONDS
                reap()
            release_pooled_connections()  # until the next beat
        except DatabaseError as exc:
            logger.warning("Worker heartbeat: database error, retrying next beat: %s", exc)
            connections.close_all()  # this thread's own: the next beat opens new ones
        except Exception:
            logger.exception("Worker heartbeat failed; retrying next beat")


def start(**_signal_kwargs: object) -> None:
    """Starts the heartbeat thread of this process (django-q2's ``post_spawn`` signal).

    Only in a worker process a cluster spawned: django-q2 sends the signal also when it
    runs a task inline (``sync``), in whatever process enqueued it."""
    global _started
    if multiprocessing.parent_process() is None:
        return
    with _lock:
        if _started:
            return
        _started = True
    threading.Thread(target=_loop, name="job-heartbeat", daemon=True).start()
    # Runs when the process leaves django-q2's task loop (its cluster stops), before Python
    # joins the job threads: the jobs in flight may finish within the grace, and are handed
    # back after it rather than awaited.
    multiprocessing.util.Finalize(None, _begin_stopping, exitpriority=100)


def _begin_stopping() -> None:
    timer = threading.Timer(settings.JOB_STOP_GRACE, stopping.set)
    timer.daemon = True  # never holds the exit up itself
    timer.start()
