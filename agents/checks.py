"""System checks of the agents' settings (``manage.py check``; ``qcluster`` runs them too)."""

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.db import connections


@register(Tags.database)
def pool_holds_every_job_thread(app_configs, **kwargs) -> list[Warning]:
    """On PostgreSQL with a pool, a worker process needs ``JOB_THREADS`` + 1 connections at
    once: each job thread runs its statements on one, and the lease heartbeat needs one
    while they do. With fewer, the heartbeat waits behind the job threads; on a busy
    machine it waited past the lease and the reaper took running jobs over (measured:
    ``bench/RESULTS.md``)."""
    pool = connections["default"].settings_dict.get("OPTIONS", {}).get("pool")
    if not isinstance(pool, dict):
        return []
    needed = settings.JOB_THREADS + 1
    if pool["max_size"] >= needed:
        return []
    return [
        Warning(
            f"DB_POOL_MAX_SIZE ({pool['max_size']}) is below JOB_THREADS + 1 ({needed}): a "
            "worker's job threads and its lease heartbeat wait on each other for connections, "
            "and on a busy machine leases lapse and running jobs are taken over.",
            hint="Raise DB_POOL_MAX_SIZE, lower JOB_THREADS, or put PgBouncer in front of "
            "PostgreSQL (docs/scaling.md, Scaling: Connections).",
            id="agents.W001",
        )
    ]
