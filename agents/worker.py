"""What every worker process runs beside its jobs: the lease heartbeat and the reaper.

One daemon thread per django-q2 worker process, started when the process is spawned. Every
``JOB_HEARTBEAT_SECONDS`` it renews the lease of the job the process is running, whatever
the job is doing (a model call that has not sent its first token, a tokenizer waiting behind
another generation, a slow tool), so the lease can be short; every ``JOB_REAP_SECONDS`` it
runs the reaper, so a job whose worker died is put back soon after its lease ran out, not
at the next minute of the schedule.

The heartbeat is guarded by the lease token like every other write of a worker: a process
that was stalled (stopped, swapped out) for longer than the lease finds, when it resumes,
its job re-queued or run by another worker, and its renewals, like its other writes,
change nothing.
"""

import contextlib
import logging
import multiprocessing
import random
import threading
import time
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError, connections

from agents import recovery, services

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_held: tuple[str, str] | None = None  # (job id, lease token) of the job this process runs
_started = False


@contextlib.contextmanager
def holding(job_id: str, token: str) -> Iterator[None]:
    """The heartbeat renews the lease of ``job_id`` while the block runs."""
    global _held
    with _lock:
        _held = (job_id, token)
    try:
        yield
    finally:
        with _lock:
            _held = None


def beat() -> None:
    """One heartbeat: renews the lease of the held job, if any."""
    with _lock:
        held = _held
    if held and not services.job_renew_lease(held[0], token=held[1]):
        # The job ended meanwhile, or this process lost it: its own next write finds out.
        logger.debug("Job %s: lease not renewed (ended, or no longer ours)", held[0])


def reap() -> None:
    counts = recovery.job_reap()
    if any(counts.values()):
        logger.info("Reaper: %s", counts)


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
