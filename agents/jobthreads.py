"""Several jobs per worker process: ``JOB_THREADS`` job threads.

A job spends most of its time waiting on the model (a chat: one call of about a second,
against some tens of milliseconds of its own work). A django-q2 worker process runs one
task at a time, so with one job per process a machine holds ``Q_WORKERS`` jobs in flight,
and each of them is a process of its own (its memory mostly the embedding model: worker
RSS in bench/RESULTS.md). Here the task of a job (``agents.tasks.run_job``) waits for a
free job thread of its process, claims the job, hands it to that thread and returns: the
process takes its next task while the job waits on the model, and one process holds up to
``JOB_THREADS`` jobs, sharing its memory, its embedding model and its heartbeat.

Nothing else changes: the claim is the same conditional update, each job's lease is renewed
by the process's heartbeat thread (``agents.worker``), every write is guarded by the job's
lease token, a cancel is seen by the job's own polling, a killed process loses its jobs to
the reaper. On PostgreSQL a job thread gives its connection back to the process's pool
while the model generates, so ``DB_POOL_MAX_SIZE`` bounds a process's connections whatever
``JOB_THREADS`` is. When the process stops (a cluster's shutdown, django-q2's recycling), its
running jobs finish first: the job threads are joined before the process exits.

A task that finds no free thread for ``JOB_THREAD_WAIT`` seconds leaves its job queued (the
reaper wakes it again), so that django-q2's timeout never kills a process that only waited.
``JOB_THREADS=1`` runs the job inside the task, as django-q2 runs any task.
"""

import logging
import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections

from agents import runner
from agents.models import Job
from core.db import release_pooled_connections

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: tuple[ThreadPoolExecutor, threading.BoundedSemaphore] | None = None


def _threads() -> tuple[ThreadPoolExecutor, threading.BoundedSemaphore]:
    global _pool
    with _lock:
        if _pool is None:
            size = settings.JOB_THREADS
            # The executor's threads are joined when the process exits (also a worker
            # process of multiprocessing), after the jobs they run have ended.
            _pool = (
                ThreadPoolExecutor(max_workers=size, thread_name_prefix="job"),
                threading.BoundedSemaphore(size),
            )
        return _pool


def _run(job: Job, token: str, free: threading.BoundedSemaphore) -> None:
    try:
        runner.run_claimed(job, token)
    except Exception:  # run_claimed ends the job itself; this is a failure of that ending
        logger.exception("Job %s: its thread failed", job.pk)
    finally:
        close_old_connections()  # back to the pool (PostgreSQL) or kept (CONN_MAX_AGE)
        free.release()


def dispatch(job_id: str) -> str:
    """Runs a delivered job: in a job thread of this worker process, or inline.

    Inline with ``JOB_THREADS=1`` and outside a worker process (django-q2's ``sync`` mode
    runs the task in the process that enqueued it). Returns what happened, for the queue's
    log: the job runs on after the return when it went to a thread.
    """
    if settings.JOB_THREADS <= 1 or multiprocessing.parent_process() is None:
        return runner.run_job(job_id)
    executor, free = _threads()
    if not free.acquire(timeout=settings.JOB_THREAD_WAIT):
        logger.warning("Job %s: no free job thread; left queued for the reaper", job_id)
        return "no free job thread"
    try:
        claimed = runner.claim(job_id)
        if claimed is None:
            free.release()
            return "not claimed"
        executor.submit(_run, *claimed, free)
    except BaseException:
        free.release()
        raise
    release_pooled_connections()  # this thread now waits for its next task
    return "running in a job thread"
