"""django-q2 entry points. A queue message only wakes a job; the Job row is the truth."""

from agents import runner, services


def run_job(job_id: str) -> str:
    return runner.run_job(job_id)


def reap_jobs() -> dict[str, int]:
    return services.job_reap()
