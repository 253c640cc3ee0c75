"""Benchmark of agent jobs on a real qcluster, on SQLite and on PostgreSQL, as a client.

    .venv/bin/python bench/jobs.py [--starts N] [--rounds N] [--databases ...]

For each database (a migrated SQLite temp file; a throwaway PostgreSQL database created and
dropped here) it runs the production server (deploy/gunicorn.conf.py) and ``manage.py
qcluster`` with 2 workers (the database broker, settings as in production), in front of a
loopback model runtime that answers at once, with a key made for the ``agent`` scope; the
task "Say hi." runs on the default profile as one model call. Jobs are started with ``POST
/agent/job/start`` and read with ``GET /agent/job/{id}``. It reports:

* ``POST /agent/job/start`` latency p50 / p99, sequential, with the cluster stopped (the
  endpoint alone: validate, insert, commit, enqueue);
* jobs/s with 2 workers: the cluster started on those N queued jobs, from the first claim
  to the last finish;
* one job's start -> finished (and, of it, claim -> finished) next to a bare django-q2
  no-op task's enqueue -> done on the same warm cluster, one at a time, p50 of each and
  their ratio. Both are the server's own timestamps (the job's ``created_at`` ->
  ``finished_at`` as GET /agent/job/{id} shows them; django-q2's ``Task.started`` ->
  ``Task.stopped``), so the polling that waits for them does not add to them.

Everything is bounded: a fixed number of jobs and tasks, each wait with a deadline.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    gunicorn,
    percentile,
    python,
    qcluster,
    runtime_process,
    service_env,
    table,
    temp_dir,
)

WORKERS = 2
TERMINAL = ("finished", "failed", "cancelled")
TARGET_START_P50_MS = 15.0
TARGET_RATIO = 1.5
BODY = {
    "source": "bench",
    "scope_type": "run",
    "scope_id": 1,
    "task": "Say hi.",
}


def noop() -> None:
    """The bare task the cluster runs for comparison."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=300, help="jobs started (and drained)")
    parser.add_argument("--rounds", type=int, default=40, help="one-at-a-time jobs and tasks")
    parser.add_argument(
        "--databases", default="sqlite,postgres", help="comma-separated: sqlite, postgres"
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: the child's role
    args = parser.parse_args(argv)
    unknown = set(args.databases.split(",")) - set(DATABASES)
    if unknown:
        parser.error(f"unknown database(s): {', '.join(sorted(unknown))}")
    if min(args.starts, args.rounds) <= 0:
        parser.error("--starts and --rounds must be positive")
    return args


@dataclass
class Figures:
    database: str
    start_p50_ms: float
    start_p99_ms: float
    jobs_per_second: float
    job_p50_ms: float
    task_p50_ms: float
    job_p99_ms: float
    task_p99_ms: float
    job_run_p50_ms: float  # claim -> finished: the job's own work, without the queue
    errors: int

    @property
    def ratio(self) -> float:
        return self.job_p50_ms / self.task_p50_ms

    def row(self) -> list[object]:
        return [
            self.database,
            self.start_p50_ms,
            self.start_p99_ms,
            round(self.jobs_per_second, 1),
            self.job_p50_ms,
            self.job_p99_ms,
            self.task_p50_ms,
            self.task_p99_ms,
            round(self.ratio, 2),
            self.job_run_p50_ms,
            self.errors,
        ]


HEADERS = [
    "database",
    "start p50",
    "start p99",
    f"jobs/s ({WORKERS} workers)",
    "job p50",
    "job p99",
    "no-op task p50",
    "no-op task p99",
    "job/task p50",
    "job run p50",
    "errors",
]


# --- The child: one database, Django set up in this process ---------------------------------


class Client:
    """One keep-alive connection to the service, with the agent key."""

    def __init__(self, base_url: str, key: str) -> None:
        parts = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}

    def start(self, webhook: str | None = None) -> str:
        """A task job started (``webhook``: the URL that receives its events)."""
        body = {**BODY, "webhook": webhook} if webhook else BODY
        self.conn.request("POST", "/agent/job/start", json.dumps(body), self.headers)
        response = self.conn.getresponse()
        data = json.loads(response.read())
        if response.status != 200 or data["data"]["status"] != "queued":
            raise RuntimeError(f"start answered {response.status}: {data}")
        return data["data"]["job_id"]

    def job(self, job_id: str) -> dict:
        """``GET /agent/job/{id}``'s data."""
        self.conn.request("GET", f"/agent/job/{job_id}", headers=self.headers)
        response = self.conn.getresponse()
        data = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"GET /agent/job/{job_id} answered {response.status}: {data}")
        return data["data"]

    def ended(self, job_id: str, *, timeout: float, interval: float = 0.005) -> dict:
        """The job once it has ended (its terminal status and the server's timestamps)."""
        return wait_until(
            lambda: (job := self.job(job_id))["status"] in TERMINAL and job,
            timeout=timeout,
            what=f"job {job_id}",
            interval=interval,
        )


def wait_until(condition, *, timeout: float, what: str, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(interval)
    return value


def seconds_between(start: str, end: str) -> float:
    """Seconds between two of the timestamps GET /agent/job/{id} shows."""
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def measure(database: str, starts: int, rounds: int) -> Figures:
    import django

    django.setup()
    from django.core.management import call_command
    from django_q.models import Task
    from django_q.tasks import async_task

    from gateway import services

    call_command("migrate", verbosity=0)
    _, key = services.api_key_create(
        name="bench",
        scopes=("agent",),
        rate_limit_per_minute=0,
        agent_starts_per_minute=0,
        agent_reads_per_minute=0,
        max_active_jobs=0,
    )
    env = dict(os.environ)
    with gunicorn(env, None) as server:
        client = Client(server.url, key)
        client.start()  # warm-up: the first request of each worker imports and connects
        # 1. The endpoint alone: the cluster is not running yet, the jobs wait for it.
        latencies, job_ids = [], []
        for _ in range(starts):
            began = time.perf_counter()
            job_ids.append(client.start())
            latencies.append(time.perf_counter() - began)
        latencies.sort()
        with qcluster(env):
            # 2. The cluster drains what was started (and the warm-up job); the jobs are
            # read one at a time, so that the reads do not load the server meanwhile.
            drained = [client.ended(job_id, timeout=300, interval=0.1) for job_id in job_ids]
            drain = seconds_between(
                min((job["started_at"] for job in drained), key=datetime.fromisoformat),
                max((job["finished_at"] for job in drained), key=datetime.fromisoformat),
            )
            # 3. One at a time on the warm cluster: a job, then a bare task.
            job_times, run_times, task_times, finished = [], [], [], []
            for _ in range(rounds):
                job = client.ended(client.start(), timeout=30)
                job_times.append(seconds_between(job["created_at"], job["finished_at"]))
                run_times.append(seconds_between(job["started_at"], job["finished_at"]))
                finished.append(job)
                task_id = async_task("bench.jobs.noop")
                task = wait_until(
                    lambda: Task.objects.filter(id=task_id).first(),  # noqa: B023
                    timeout=30,
                    what=f"task {task_id}",
                )
                task_times.append((task.stopped - task.started).total_seconds())
    errors = sum(job["status"] != "finished" for job in drained + finished)
    job_times.sort()
    task_times.sort()
    return Figures(
        database=database,
        start_p50_ms=ms(percentile(latencies, 50)),
        start_p99_ms=ms(percentile(latencies, 99)),
        jobs_per_second=len(job_ids) / drain,
        job_p50_ms=ms(statistics.median(job_times)),
        task_p50_ms=ms(statistics.median(task_times)),
        job_p99_ms=ms(percentile(job_times, 99)),
        task_p99_ms=ms(percentile(task_times, 99)),
        job_run_p50_ms=ms(statistics.median(run_times)),
        errors=errors,
    )


# --- The parent: a runtime, then a child per database ------------------------------------------


def bench_database(name: str, runtime_url: str, args: argparse.Namespace) -> Figures:
    with DATABASES[name]() as db_url, temp_dir("llmgw-bench-var-") as var_dir:
        # Q_SAVE_LIMIT=0: django-q2 keeps the successful tasks, whose timestamps the no-op's
        # figure reads (production keeps none).
        env = service_env(
            db_url,
            runtime_url=runtime_url,
            var_dir=var_dir,
            Q_WORKERS=WORKERS,
            AGENT_MODEL=MODEL,
            Q_SAVE_LIMIT=0,
        )
        result = subprocess.run(
            [
                python(),
                "-m",
                "bench.jobs",
                f"--measure={name}",
                f"--starts={args.starts}",
                f"--rounds={args.rounds}",
            ],
            cwd=PROJECT_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    if result.returncode != 0:
        raise RuntimeError(f"the {name} run failed:\n{result.stderr[-6000:]}")
    return Figures(**json.loads(result.stdout.strip().splitlines()[-1]))


def verdict(figures: list[Figures]) -> str:
    parts, met = [], True
    for fig in figures:
        start_ok = fig.start_p50_ms <= TARGET_START_P50_MS
        ratio_ok = fig.ratio <= TARGET_RATIO
        met &= start_ok and ratio_ok
        parts.append(
            f"{fig.database} start p50 {fig.start_p50_ms:.2f} ms "
            f"{'<=' if start_ok else '>'} {TARGET_START_P50_MS:g} ms, job/task "
            f"{fig.ratio:.2f}x {'<=' if ratio_ok else '>'} {TARGET_RATIO:g}x"
        )
    return "targets: " + "; ".join(parts) + (" -- met" if met else " -- MISSED")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.measure:
        figures = measure(args.measure, args.starts, args.rounds)
        print(json.dumps(asdict(figures)))
        return 0
    print(
        f"jobs benchmark: the production server (DEBUG=0), qcluster with {WORKERS} workers on "
        f"the database broker, an instant loopback runtime; {os.cpu_count()} CPUs, load "
        f"average {os.getloadavg()[0]:.2f}; Python {platform.python_version()}; "
        f"{args.starts} jobs started then drained, {args.rounds} one-at-a-time jobs and "
        "no-op tasks; times in ms"
    )
    with runtime_process(models=(MODEL,)) as runtime:
        figures = [bench_database(name, runtime.url, args) for name in args.databases.split(",")]
    print(table(HEADERS, [fig.row() for fig in figures]))
    print(verdict(figures))
    return 1 if any(fig.errors for fig in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
