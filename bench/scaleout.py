"""Scale-out on one machine: PostgreSQL, the Redis broker, 1, 2 then 3 ``qcluster``
processes, and two runtime endpoints behind routing.

    .venv/bin/python bench/scaleout.py [--jobs 1000] [--workers 4] [--call-seconds 0.5]

A throwaway PostgreSQL database, a redis-server of its own (on a free port of 19500-19599,
no persistence), two loopback runtimes (tests/runtime_server.py, each in its own process,
holding every model call ``--call-seconds``) registered as two *Runtime endpoints* with a
*Model route* each for the one model. For 1, 2 and 3 clusters (``--workers`` worker
processes each, one queue), it starts the clusters, waits until each reports to the broker,
queues ``--jobs`` task jobs (one model call each) and waits until every one has ended. It
prints per round: jobs/s (first job created to last job finished), whether every job
finished, ran exactly once (one claim, one model call's usage record) and none was lost,
and how the calls spread over the two endpoints. Exit status 1 if a job was lost, failed
or ran twice, or if throughput did not grow with the clusters.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    MODEL,
    postgres_database,
    qcluster,
    redis_server,
    service_env,
    slow_runtime,
    table,
    temp_dir,
)
from bench.jobs import wait_until


def setup(env: dict[str, str], runtimes: list[str]):
    """Django in this process, on the run's database: migrated (its default profile on
    ``MODEL``), a key, and the routes. Endpoints and routes are admin data that no service
    writes: they are saved as the admin saves them."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from gateway import services
    from gateway.models import ModelRoute, RuntimeEndpoint

    call_command("migrate", verbosity=0)
    api_key, _ = services.api_key_create(name="scaleout", rate_limit_per_minute=0)
    for index, url in enumerate(runtimes):
        endpoint = RuntimeEndpoint.objects.create(name=f"runtime-{index}", base_url=url)
        ModelRoute.objects.create(model=MODEL, endpoint=endpoint)
    return api_key


def queue_jobs(api_key, count: int) -> list[str]:
    """Task jobs on the default profile (not arithmetic: one model call), started as the
    API starts them."""
    from agents import services

    return [
        services.task_start(
            api_key=api_key, source="scaleout", scope_type="job", scope_id=str(index),
            task="Say done.", profile_name=None,
        ).pk
        for index in range(count)
    ]  # fmt: skip


def clusters_reporting(count: int) -> bool:
    from django_q.status import Stat

    return len(Stat.get_all()) >= count


def round_figures(api_key, job_ids: list[str]) -> dict[str, object]:
    """The round's jobs as their owner reads them; their model calls from the usage records
    (no selector counts them per job and endpoint)."""
    from django.db.models import Count

    from agents.selectors import job_get_for_owner
    from gateway.models import UsageRecord

    jobs = [job_get_for_owner(job_id=job_id, owner_id=api_key.owner_id) for job_id in job_ids]
    usage = UsageRecord.objects.filter(job_id__in=job_ids)
    calls_per_job = usage.values("job_id").annotate(n=Count("id"))
    by_endpoint = dict(usage.values_list("endpoint").annotate(n=Count("id")))
    first = min(job.created_at for job in jobs)
    last = max(job.finished_at for job in jobs if job.finished_at)
    return {
        "seconds": (last - first).total_seconds(),
        "finished": sum(job.status == "finished" for job in jobs),
        "claimed once": sum(job.attempts == 1 for job in jobs),
        "one model call": calls_per_job.filter(n=1).count(),
        "endpoints": by_endpoint,
    }


def run_round(clusters: int, env, api_key, args) -> dict[str, object]:
    with contextlib.ExitStack() as stack:
        for _ in range(clusters):
            stack.enter_context(qcluster(env))
        wait_until(
            lambda: clusters_reporting(clusters), timeout=60, what="the clusters", interval=0.2
        )
        job_ids = queue_jobs(api_key, args.jobs)
        from agents.selectors import job_counts_now

        wait_until(
            lambda: not any(job_counts_now().values()),
            timeout=args.jobs * args.call_seconds + 120,
            what="the jobs",
            interval=0.5,
        )
    return round_figures(api_key, job_ids)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per round")
    parser.add_argument("--workers", type=int, default=4, help="worker processes per cluster")
    parser.add_argument("--call-seconds", type=float, default=0.5, help="each model call")
    parser.add_argument("--max-clusters", type=int, default=3)
    args = parser.parse_args(argv)
    if min(args.jobs, args.workers, args.max_clusters) <= 0 or args.call_seconds < 0:
        parser.error("--jobs, --workers and --max-clusters must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"scale-out: {args.jobs} jobs per round, qclusters of {args.workers} workers on one "
        f"Redis queue, PostgreSQL, 2 routed runtime endpoints holding each call "
        f"{args.call_seconds:g} s; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    with (
        slow_runtime(args.call_seconds) as first,
        slow_runtime(args.call_seconds) as second,
        postgres_database() as db_url,
        redis_server() as redis,
        temp_dir("llmgw-bench-var-") as var_dir,
    ):
        env = service_env(
            db_url,
            runtime_url="http://127.0.0.1:9",  # every call must go through a route
            var_dir=var_dir,
            REDIS_URL=redis.url,
            Q_WORKERS=args.workers,
            Q_CLUSTER_NAME="scaleout",
            AGENT_MODEL=MODEL,
        )
        api_key = setup(env, [first.url, second.url])
        rows, ok = [], True
        for clusters in range(1, args.max_clusters + 1):
            fig = run_round(clusters, env, api_key, args)
            rate = args.jobs / fig["seconds"]
            exact = fig["finished"] == fig["claimed once"] == fig["one model call"] == args.jobs
            ok &= exact and (not rows or rate > rows[-1][1])
            spread = ", ".join(f"{k} {v}" for k, v in sorted(fig["endpoints"].items()))
            rows.append(
                [
                    clusters,
                    round(rate, 1),
                    fig["finished"],
                    fig["claimed once"],
                    fig["one model call"],
                    args.jobs - fig["finished"],
                    spread,
                ]
            )
    print(
        table(
            [
                "clusters",
                "jobs/s",
                "finished",
                "claimed once",
                "one model call",
                "lost",
                "calls per endpoint",
            ],
            rows,
        )
    )
    base = rows[0][1]
    print("throughput vs 1 cluster: " + ", ".join(f"{r[0]}: {r[1] / base:.2f}x" for r in rows))
    print(
        "targets: every job exactly once, none lost, throughput grows -- "
        + ("met" if ok else "MISSED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
