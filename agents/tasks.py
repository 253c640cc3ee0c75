"""django-q2 entry points. A queue message only wakes a job; the Job row is the truth."""

from agents import deliverythreads, jobthreads, recovery


def run_job(job_id: str) -> str:
    return jobthreads.dispatch(job_id)


def reap_jobs() -> dict[str, int]:
    return recovery.job_reap()


def deliver_webhook(delivery_id: str) -> str:
    return deliverythreads.dispatch(delivery_id)
