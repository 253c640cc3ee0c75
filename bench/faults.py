"""Recovery figures with the production settings: a SIGKILLed worker, dropped PostgreSQL
connections, a restarted Redis.

    .venv/bin/python bench/faults.py [--rounds 3] [--broker orm|redis]

A throwaway PostgreSQL database, two ``qcluster`` processes (2 workers each, the lease,
heartbeat and reaper settings of production: nothing is shortened here) and a loopback
runtime that holds a call 5 s when its prompt says ``[slow]`` and answers others at once.
Jobs are started as the API starts them (``agents.services.task_start``, the default
profile) and every figure is read through the agents' public selector (the server's own
timestamps; the lease says which cluster runs a job). Per round:

* **SIGKILL**: a slow job runs; the cluster running it is SIGKILLed; seconds until the job
  runs again on the other cluster (target 20 s);
* **drop while idle**: every connection of the database is terminated while the clusters
  wait; seconds from the next job's creation to its start (target 5 s);
* **drop while busy**: the same while two slow jobs hold a worker of each cluster;
* **Redis restart** (``--broker redis``, on a redis-server of its own): Redis is killed and
  started again empty; seconds from the next job's creation to its start.

The clusters' logs are searched for django-q2's "Failed to pull task from broker" (its
pusher giving up for 10 s): the count is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    MODEL,
    TERMINATE_EVERY_CONNECTION,
    postgres_database,
    redis_server,
    service_env,
    slow_runtime,
    table,
    temp_dir,
)
from bench.jobs import wait_until

SLOW = "[slow]"
TARGET_RECOVERY = 20.0
TARGET_START = 5.0


def setup(env: dict[str, str]):
    """The database migrated (its default profile on ``MODEL``) and an unlimited key."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from gateway import services

    call_command("migrate", verbosity=0)
    api_key, _ = services.api_key_create(
        name="faults",
        rate_limit_per_minute=0,
        agent_starts_per_minute=0,
        agent_reads_per_minute=0,
        max_active_jobs=0,
    )
    return api_key


def start_job(api_key, task: str) -> str:
    """A task job on the default profile (not arithmetic: one model call), as the API
    starts it."""
    from agents import services

    job = services.task_start(
        api_key=api_key, source="faults", scope_type="job", scope_id="1", task=task,
        profile_name=None,
    )  # fmt: skip
    return job.pk


def job(api_key, job_id: str):
    """The job as its owner reads it (its status, lease, attempts and timestamps)."""
    from django.db import close_old_connections

    from agents.selectors import job_get_for_owner

    close_old_connections()
    return job_get_for_owner(job_id=job_id, owner_id=api_key.owner_id)


def seconds_to_start(api_key, job_id: str) -> float:
    done = wait_until(
        lambda: job(api_key, job_id).started_at, timeout=120, what=job_id, interval=0.05
    )
    return (done - job(api_key, job_id).created_at).total_seconds()


def terminate_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(TERMINATE_EVERY_CONNECTION)
        return cursor.fetchone()[0]


class Clusters:
    """qclusters in their own process groups, logging to files; restartable."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs, self.processes = env, logs, []

    def start(self) -> None:
        import subprocess

        from bench.common import PROJECT_DIR, python

        log = (self.logs / f"qcluster-{len(self.processes)}.log").open("wb")
        self.processes.append(
            subprocess.Popen(
                [python(), "manage.py", "qcluster"],
                cwd=PROJECT_DIR,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def kill_holder(self, lease_owner: str) -> None:
        """SIGKILLs the cluster whose worker process holds ``lease_owner`` (host:pid:...)."""
        pid = int(lease_owner.split(":")[1])
        group = os.getpgid(pid)
        os.killpg(group, signal.SIGKILL)
        for process in self.processes:
            if process.pid == group:
                process.wait()

    def pusher_failures(self) -> int:
        text = "".join(p.read_text(errors="replace") for p in self.logs.glob("qcluster-*.log"))
        return text.count("Failed to pull task from broker")

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def sigkill_round(clusters: Clusters, api_key) -> float:
    job_id = start_job(api_key, f"{SLOW} the job whose worker dies")
    running = wait_until(lambda: job(api_key, job_id).lease_owner, timeout=60, what="the claim")
    time.sleep(1)  # into the model call
    killed_at = time.time()
    clusters.kill_holder(running)
    clusters.start()  # the other cluster takes over; this one is back for the next round
    wait_until(lambda: job(api_key, job_id).attempts >= 2, timeout=120, what="the second attempt")
    return time.time() - killed_at


def drop_round(api_key, *, busy: bool) -> float:
    holders = []
    if busy:
        holders = [start_job(api_key, f"{SLOW} holding a worker") for _ in range(2)]
        wait_until(
            lambda: all(job(api_key, j).started_at for j in holders), timeout=60, what="busy"
        )
    else:
        time.sleep(2)  # the clusters idle
    terminate_connections()
    return seconds_to_start(api_key, start_job(api_key, "after the drop"))


def redis_round(redis, api_key) -> float:
    redis.kill()
    redis.start()
    return seconds_to_start(api_key, start_job(api_key, "after the restart"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker", choices=("orm", "redis"), default="orm")
    args = parser.parse_args(argv)
    print(
        f"faults: PostgreSQL, 2 qclusters x 2 workers, broker {args.broker}, production lease "
        f"settings; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; seconds"
    )
    with (
        slow_runtime(5.0, marker=SLOW) as runtime,
        postgres_database() as db_url,
        temp_dir("llmgw-bench-faults-") as var_dir,
        redis_server() as redis,
    ):
        extra = {"REDIS_URL": redis.url} if args.broker == "redis" else {}
        env = service_env(
            db_url, runtime_url=runtime.url, var_dir=var_dir, Q_WORKERS=2, AGENT_MODEL=MODEL,
            **extra,
        )  # fmt: skip
        api_key = setup(env)
        clusters = Clusters(env, var_dir)
        try:
            clusters.start()
            clusters.start()
            rows = []
            for _ in range(args.rounds):
                row = [sigkill_round(clusters, api_key)]
                row += [drop_round(api_key, busy=False)]
                row += [drop_round(api_key, busy=True)]
                if args.broker == "redis":
                    row.append(redis_round(redis, api_key))
                rows.append([len(rows) + 1, *(round(value, 2) for value in row)])
            failures = clusters.pusher_failures()
        finally:
            clusters.stop_all()
    headers = ["round", "SIGKILL -> running again", "drop idle -> start", "drop busy -> start"]
    if args.broker == "redis":
        headers.append("Redis restart -> start")
    print(table(headers, rows))
    print(f"pusher failures in the clusters' logs: {failures}")
    worst = [max(row[i] for row in rows) for i in range(1, len(headers))]
    met = worst[0] <= TARGET_RECOVERY and max(worst[1:]) <= TARGET_START
    print(
        f"targets: SIGKILL worst {worst[0]:.1f} s (<= {TARGET_RECOVERY:g}), job start after "
        f"a fault worst {max(worst[1:]):.1f} s (<= {TARGET_START:g}) -- "
        + ("met" if met else "MISSED")
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
