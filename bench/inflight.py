"""Model calls in flight: ``POST /api.php`` and chat jobs against a runtime that holds each
call 1 s, in one command.

    .venv/bin/python bench/inflight.py [--base REV] [--litellm] [--clients 16,64,256]
                                       [--seconds 20] [--load wrk|asyncio]
                                       [--q-workers 2,8,32] [--job-threads 1,4]

One loopback runtime (asyncio, its own process) holds every call of ``bench-model`` for
``--hold`` seconds and answers ``bench-instant`` at once. In front of it, each under its own
production settings (``deploy/gunicorn.conf.py``, ``WEB_CONCURRENCY=2``, DEBUG=0,
PostgreSQL, Redis as the broker):

* this working tree (``after``);
* with ``--base REV`` (repeatable), that commit (``before``), checked out in a temporary
  worktree;
* with ``--litellm``, LiteLLM's proxy (2 workers) from the virtualenv ``--litellm-venv``
  (``python3 -m venv var/litellm-venv && var/litellm-venv/bin/pip install 'litellm[proxy]'``),
  its ``/v1/completions`` routed to the same runtime, with a master key.

For each number of clients the servers take turns (so that the shared machine's slow spells
fall on all of them): the clients call in a closed loop for ``--seconds``, while a probe
makes an instant call every 0.1 s. The load comes from ``wrk`` (``apt-get install wrk``)
when it is installed, as in the issue's figures, else from the Python client of
``bench/asyncload.py`` (``--load asyncio``), which takes a share of the two cores from the
servers it measures. wrk drops the requests in flight when its time is up, so a run
undercounts by about half a round of the clients (at 256 clients, 5% of a 10 s run), hence
20 s a run. Printed: req/s, p50, p99, errors, the probe's p50, the CPU per request of the
server's processes and of the whole machine (database, runtime and load generator
included), and the ratios.

Then the chat jobs: for each ``Q_WORKERS`` and ``JOB_THREADS`` (jobs per worker process;
the earlier commit runs with 1 only), a qcluster drains ``--jobs-per-slot`` x
``Q_WORKERS`` x ``JOB_THREADS`` chats started at once (each one model call held ``--hold``
s); printed: jobs/s, per job in flight, start -> finished p50 and p99, the p50 of start
-> claimed (queued) and of claimed -> finished (run), the cluster's CPU per job, and the
memory of a worker and of the whole cluster. A cluster's ``DB_POOL_MAX_SIZE`` (``pool``)
is the default 8 unless its pools would pass what PostgreSQL's ``max_connections`` leaves
beside the connections open (the web servers'), as docs/scaling.md sizes it;
never below ``JOB_THREADS + 1``: a size that cannot have that is not run, and the bench
says why.

Everything is bounded in time and torn down at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import asyncload, wrkload
from bench.common import (
    LOOPBACK,
    PROJECT_DIR,
    _stop,
    checkout,
    cpu_seconds,
    create_api_key,
    free_port,
    gunicorn,
    machine_busy_seconds,
    manage,
    percentile,
    postgres_database,
    process_tree,
    qcluster,
    runtime_process,
    service_env,
    table,
    temp_dir,
    wait_until_answering,
)

MODEL, INSTANT = "bench-model", "bench-instant"
PROMPT = "Say hi."
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/4")


@dataclass
class Target:
    label: str
    url: str
    body: dict
    probe: dict
    headers: dict[str, str]
    pid: int = 0
    env: dict[str, str] | None = None  # the environment of our own services


def service(
    label: str,
    tree: Path,
    runtime_url: str,
    stack: contextlib.ExitStack,
    extra: dict[str, str] | None = None,
) -> Target:
    """A migrated database, a key and the web server of ``tree`` (``extra``: more settings)."""
    env = service_env(
        stack.enter_context(postgres_database()),
        runtime_url=runtime_url,
        var_dir=stack.enter_context(temp_dir()),
        tree=tree,
        AGENT_MODEL=MODEL,
        WEB_CONCURRENCY=2,
        REDIS_URL=REDIS_URL,
        Q_CLUSTER_NAME=f"inflight-{os.getpid()}-{label.split()[0]}",
        **(extra or {}),
    )
    manage(env, "migrate", "--no-input")
    key = create_api_key(env, name="bench", scopes="model,agent")
    server = stack.enter_context(gunicorn(env, None))
    return Target(
        label,
        f"{server.url}/api.php",
        {"api_key": key, "model": MODEL, "prompt": PROMPT},
        {"api_key": key, "model": INSTANT, "prompt": PROMPT},
        {},
        server.pid,
        env,
    )


_LITELLM_CONFIG = """
model_list:
  - model_name: {model}
    litellm_params: {{model: "{provider}/{model}", api_base: "{runtime}"}}
  - model_name: {instant}
    litellm_params: {{model: "{provider}/{instant}", api_base: "{runtime}"}}
general_settings:
  master_key: sk-bench-inflight
"""


@contextlib.contextmanager
def litellm(venv: Path, runtime_url: str, *, chat: bool = False) -> Iterator[Target]:
    """LiteLLM's proxy with 2 workers, its models routed to the same runtime: its
    ``/v1/completions`` on Ollama's ``/api/generate``, or with ``chat`` its
    ``/v1/chat/completions`` on Ollama's ``/api/chat``."""
    port = free_port()
    with temp_dir("llmgw-bench-litellm-") as path:
        config = path / "config.yaml"
        provider = "ollama_chat" if chat else "ollama"
        config.write_text(
            _LITELLM_CONFIG.format(
                model=MODEL, instant=INSTANT, runtime=runtime_url, provider=provider
            )
        )
        process = subprocess.Popen(
            [
                str(venv / "bin" / "litellm"),
                "--config",
                str(config),
                "--host",
                LOOPBACK,
                "--port",
                str(port),
                "--num_workers",
                "2",
                # uvicorn restarts a worker that has not answered its supervisor in 5 s;
                # starting LiteLLM on a busy machine takes longer.
                "--timeout_worker_healthcheck",
                "300",
            ],
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(path),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_LOG": "ERROR",
            },
            stdout=subprocess.DEVNULL,
            stderr=(path / "litellm.log").open("wb"),
        )
        url = f"http://{LOOPBACK}:{port}"
        try:
            wait_until_answering(f"{url}/health/liveliness", process=process, timeout=180)
            headers = {"Authorization": "Bearer sk-bench-inflight"}
            if chat:
                yield Target(
                    "LiteLLM proxy",
                    f"{url}/v1/chat/completions",
                    chat_body(MODEL),
                    chat_body(INSTANT),
                    headers,
                    process.pid,
                )
            else:
                yield Target(
                    "LiteLLM proxy",
                    f"{url}/v1/completions",
                    {"model": MODEL, "prompt": PROMPT},
                    {"model": INSTANT, "prompt": PROMPT},
                    headers,
                    process.pid,
                )
        except BaseException:
            sys.stderr.write((path / "litellm.log").read_text(errors="replace")[-3000:])
            raise
        finally:
            _stop(process)


def chat_body(model: str) -> dict:
    """An OpenAI chat completion request of one user message."""
    return {"model": model, "messages": [{"role": "user", "content": PROMPT}]}


def memory_mb(pids: list[int], *, largest: bool = False) -> tuple[float, float]:
    """(median RSS of one process, or the largest's, PSS of them all), in MiB."""
    rss, pss = [], 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss.append(int(line.split()[1]) / 1024)
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) / 1024
    if not rss:
        return 0.0, pss
    return (max(rss) if largest else statistics.median(rss)), pss


def load_rows(
    targets: list[Target], clients: list[int], seconds: float, generator: str
) -> list[list]:
    runner = wrkload.run if generator == "wrk" else asyncload.run
    rows = []
    for count in clients:
        for target in targets:
            processes = process_tree(target.pid)
            cpu_before = sum(cpu_seconds(processes).values())
            busy_before = machine_busy_seconds()
            load = asyncio.run(
                runner(
                    asyncload.Spec(
                        target.url,
                        target.body,
                        clients=count,
                        seconds=seconds,
                        headers=target.headers,
                        probe_body=target.probe,
                    )
                )
            )
            cpu = sum(cpu_seconds(processes).values()) - cpu_before
            busy = machine_busy_seconds() - busy_before
            rss, pss = memory_mb(process_tree(target.pid)[1:])
            if load.first_error:
                print(f"  {target.label}, {count} clients: first error: {load.first_error}")
            rows.append(
                [
                    target.label,
                    count,
                    round(load.rps, 1),
                    round(load.p(50), 2),
                    round(load.p(99), 2),
                    load.errors,
                    round(load.probe_p50() * 1000, 1),
                    round(1000 * cpu / max(1, load.requests), 2),
                    round(1000 * busy / max(1, load.requests), 2),
                    round(rss),
                    round(pss),
                ]
            )
    return rows


def ratios(rows: list[list], labels: list[str]) -> list[list]:
    """After / each other server, req/s at each number of clients."""
    by = {(row[0], row[1]): row for row in rows}
    out = []
    for count in sorted({row[1] for row in rows}):
        after = by[(labels[0], count)][2]
        out.append([count] + [round(after / by[(o, count)][2], 2) for o in labels[1:]])
    return out


def job_times(database_url: str, ids: list[str]) -> list[tuple]:
    import psycopg

    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT status, created_at, started_at, finished_at, error FROM agents_job"
            " WHERE id = ANY(%s)",
            [ids],
        ).fetchall()


def run_chats(target: Target, count: int, tag: str, timeout: float) -> list[tuple]:
    """Starts ``count`` chats at once, each on a conversation of its own; returns the rows
    of their jobs once all are over (or the time is up)."""
    base = target.url.removesuffix("/api.php")
    bodies = [
        {"source": "bench", "scope_type": tag, "scope_id": i, "prompt": PROMPT}
        for i in range(count)
    ]
    answers = asyncio.run(
        asyncload.post_many(
            f"{base}/agent/chat",
            bodies,
            connections=min(count, 16),
            headers={"Authorization": f"Bearer {target.body['api_key']}"},
        )
    )
    ids = [data["data"]["job_id"] for status, data in answers if status == 200]
    if len(ids) != count:
        raise RuntimeError(f"{count - len(ids)} chats were not started: {answers[:3]}")
    deadline = time.monotonic() + timeout
    while True:
        assert target.env is not None
        rows = job_times(target.env["DATABASE_URL"], ids)
        if all(row[3] is not None for row in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def chat_rows(
    target: Target,
    q_workers: list[int],
    job_threads: list[int],
    per_slot: int,
    hold: float,
    extra: dict[str, str],
) -> list[list]:
    """For each ``Q_WORKERS`` x ``JOB_THREADS`` (an earlier commit: ``JOB_THREADS`` 1 only,
    as it may not have them), a cluster drains ``per_slot`` chats per job in flight."""
    rows = []
    ours = target.label.startswith("after")
    for workers in q_workers:
        for threads in job_threads if ours else [1]:
            row = chat_row(target, workers, threads, per_slot, hold, extra if ours else {})
            if row is not None:
                rows.append(row)
    return rows


WEB_POOLS = 2 * 8  # a service's web connections at most: WEB_CONCURRENCY x DB_POOL_MAX_SIZE


def cluster_pool_size(database_url: str, workers: int, threads: int) -> tuple[int, str]:
    """``DB_POOL_MAX_SIZE`` for a cluster of ``workers`` processes of ``threads`` job threads,
    sized as docs/scaling.md says: the default (8) unless the pools of the
    cluster's processes would pass what PostgreSQL's ``max_connections`` leaves beside the
    connections open now (the web servers' pools among them), but never below ``threads``
    + 1 (``agents.W001``). 0, and why, when even that does not fit."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        limit = int(conn.execute("SHOW max_connections").fetchone()[0])
        reserved = int(conn.execute("SHOW superuser_reserved_connections").fetchone()[0])
        open_now, ours = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE datname = current_database())"
            " FROM pg_stat_activity WHERE backend_type = 'client backend'"
        ).fetchone()
    # Room for this service's web pools to grow to their bound while chats are started, for
    # the bench's own polling and a psql.
    web_growth = max(0, WEB_POOLS - (ours - 1))
    spare = limit - reserved - open_now - web_growth - 4
    processes = workers + 3  # + the sentinel, monitor and pusher
    pool = min(8, spare // processes)
    if pool < threads + 1:
        return 0, (
            f"needs {processes} x {threads + 1} connections, PostgreSQL has {spare} to spare"
            f" (max_connections {limit}, {open_now} open)"
        )
    return pool, ""


def chat_row(
    target: Target,
    workers: int,
    threads: int,
    per_slot: int,
    hold: float,
    extra: dict[str, str],
) -> list | None:
    assert target.env is not None
    pool, why = cluster_pool_size(target.env["DATABASE_URL"], workers, threads)
    if not pool and "DB_POOL_MAX_SIZE" not in extra:
        print(f"  {target.label}, {workers}x{threads}: not run: {why}")
        return None
    env = {
        **target.env,
        "Q_WORKERS": str(workers),
        "JOB_THREADS": str(threads),
        "DB_POOL_MAX_SIZE": str(pool),
        **extra,
    }
    in_flight = workers * threads
    count = in_flight * per_slot
    with qcluster(env) as cluster:
        run_chats(target, 1, f"warm{workers}x{threads}", timeout=120)  # the cluster is up
        processes = process_tree(cluster.pid)
        cpu_before = sum(cpu_seconds(processes).values())
        jobs = run_chats(target, count, f"q{workers}x{threads}", timeout=60 + 4 * count * hold)
        cpu = sum(cpu_seconds(processes).values()) - cpu_before
        # The largest is a worker (the others: the sentinel, monitor and pusher).
        rss, pss = memory_mb(processes[1:], largest=True)
    done = [row for row in jobs if row[0] == "finished"]
    if len(done) < len(jobs):
        failed = next(row for row in jobs if row[0] != "finished")
        print(f"  {target.label}, {workers}x{threads}: a job ended {failed[0]}: {failed[4]}")
    spans = sorted((row[3] - row[1]).total_seconds() for row in done)
    queued = sorted((row[2] - row[1]).total_seconds() for row in done)
    running = sorted((row[3] - row[2]).total_seconds() for row in done)
    wall = (max(r[3] for r in done) - min(r[1] for r in done)).total_seconds() if done else 0
    rate = len(done) / wall if wall else 0.0
    return [
        target.label,
        workers,
        threads,
        env["DB_POOL_MAX_SIZE"],
        count,
        len(jobs) - len(done),
        round(rate, 2),
        round(rate / in_flight, 2),
        round(percentile(spans, 50), 2),
        round(percentile(spans, 99), 2),
        round(percentile(queued, 50), 2),
        round(percentile(running, 50), 2),
        round(1000 * cpu / max(1, len(jobs))),
        round(rss),
        round(pss),
        round(pss / in_flight),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base",
        action="append",
        default=[],
        help="also run this earlier commit (any git revision; repeatable)",
    )
    parser.add_argument("--litellm", action="store_true", help="also run LiteLLM's proxy")
    parser.add_argument("--litellm-venv", type=Path, default=PROJECT_DIR / "var/litellm-venv")
    parser.add_argument("--clients", default="16,64,256")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--load",
        choices=("wrk", "asyncio"),
        default="wrk" if wrkload.available() else "asyncio",
        help="the load generator: wrk (apt install wrk; the default when installed) or the"
        " Python client of bench/asyncload.py, which takes a share of the two cores",
    )
    parser.add_argument("--hold", type=float, default=1.0, help="seconds a model call takes")
    parser.add_argument("--q-workers", default="2,8,32", help="'' skips the chat jobs")
    parser.add_argument("--job-threads", default="1,4", help="JOB_THREADS values")
    parser.add_argument(
        "--cluster-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the working tree's clusters (repeatable)",
    )
    parser.add_argument(
        "--web-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the working tree's web server (repeatable)",
    )
    parser.add_argument(
        "--jobs-per-slot", type=int, default=4, help="chats per job in flight (Q_WORKERS x threads)"
    )
    args = parser.parse_args(argv)
    clients = [int(c) for c in args.clients.split(",") if c]
    q_workers = [int(q) for q in args.q_workers.split(",") if q]
    job_threads = [int(t) for t in args.job_threads.split(",") if t]
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with contextlib.ExitStack() as stack:
        runtime = stack.enter_context(
            runtime_process(models=(f"{MODEL}={args.hold}", f"{INSTANT}=0"))
        )
        web_env = dict(item.split("=", 1) for item in args.web_env)
        targets = [service("after (working tree)", PROJECT_DIR, runtime.url, stack, web_env)]
        for rev in args.base:
            targets.append(base_service(rev, runtime.url, stack))
        if args.litellm:
            targets.append(stack.enter_context(litellm(args.litellm_venv, runtime.url)))
        for target in targets:  # connections made, code loaded
            asyncio.run(
                asyncload.run(asyncload.Spec(target.url, target.body, clients=16, seconds=2))
            )
        rows = load_rows(targets, clients, args.seconds, args.load)
        print(
            f"\nPOST /api.php, model calls held {args.hold:g} s, PostgreSQL, production settings"
            f" (2 web processes); {args.seconds:g} s per run, load from {args.load};"
            " latencies in s, probe in ms,"
            " CPU of the server processes per request in ms (machine: of every process, the"
            " database, runtime and load included), memory of the web processes in MiB"
        )
        headers = ["server", "clients", "req/s", "p50", "p99", "errors", "instant p50"]
        print(table([*headers, "CPU ms/req", "machine", "RSS/process", "PSS all"], rows))
        if len(targets) > 1:
            labels = [t.label for t in targets]
            print("\nreq/s ratio, after / ...")
            print(table(["clients", *labels[1:]], ratios(rows, labels)))
        if q_workers:
            chats = []
            ours = [target for target in targets if target.env is not None]
            extra = dict(item.split("=", 1) for item in args.cluster_env)
            for target in ours:
                chats += chat_rows(
                    target,
                    q_workers,
                    job_threads,
                    args.jobs_per_slot,
                    args.hold,
                    extra,
                )
            print(f"\nchat jobs, one model call held {args.hold:g} s each, Redis broker")
            print(
                table(
                    [
                        "server",
                        "Q_WORKERS",
                        "JOB_THREADS",
                        "pool",
                        "jobs",
                        "not finished",
                        "jobs/s",
                        "per job in flight",
                        "p50 s",
                        "p99 s",
                        "queued p50",
                        "run p50",
                        "CPU ms/job",
                        "worker RSS MiB",
                        "PSS cluster",
                        "PSS/job in flight",
                    ],
                    chats,
                )
            )
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


def base_service(rev: str, runtime_url: str, stack: contextlib.ExitStack) -> Target:
    """The service of an earlier commit, checked out in a temporary worktree."""
    short, worktree = stack.enter_context(checkout(rev))
    return service(f"before ({short})", worktree, runtime_url, stack)


if __name__ == "__main__":
    sys.exit(main())
