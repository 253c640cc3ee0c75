"""django-q2 entry points. A queue message only wakes a job; the Job row is the truth.

Each first closes the connections the database server dropped since the last task: django-q2
closes only those that fail a health check, which ``config.postgresql`` skips for a
connection used a moment ago.
"""

from agents import deliverythreads, jobthreads, recovery
from core.db import close_dropped_connections


def run_job(job_id: str) -> str:
    close_dropped_connections()
    return jobthreads.dispatch(job_id)


def reap_jobs() -> dict[str, int]:
    close_dropped_connections()
    return recovery.job_reap()


def deliver_webhook(delivery_id: str) -> str:
    close_dropped_connections()
    return deliverythreads.dispatch(delivery_id)
