"""Webhooks under load: jobs with a webhook to a local receiver, beside an earlier commit.

    .venv/bin/python bench/webhooks.py --base REV [--jobs 1000] [--rounds 2]

On PostgreSQL, three services, each on a database of its own, in front of the same loopback
model runtime (it answers at once): the commit REV (checked out in a temporary git
worktree), this tree, and this tree with a ``webhook`` on every job (its default events:
the terminal ones), to a receiver in this process. For each, ``--jobs`` jobs are
started through the API with the cluster stopped, then a qcluster (2 workers, 4 job threads
each) drains them: jobs/s from the first claim to the last finish (the jobs' own
timestamps, as GET /agent/job/{id} shows them). With webhooks, the receiver notes when each
``job.finished`` arrives: the delivery latency is that moment minus the job's
``finished_at``, p50 and p99, and the run waits until every event arrived (de-duplicated on
``webhook-id``). "backlog" is the drain's jobs (their deliveries' tasks queue behind the
wake-ups of the jobs still waiting), "paced" is ``--paced`` jobs started 5/s on the idle
cluster afterwards. The rounds go back and forth between the three, so that the shared
machine's slow spells fall on all of them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    MODEL,
    PROJECT_DIR,
    checkout,
    create_api_key,
    gunicorn,
    manage,
    percentile,
    postgres_database,
    qcluster,
    runtime_process,
    service_env,
    table,
    temp_dir,
)
from bench.jobs import Client, seconds_between
from tests.webhook_receiver import WebhookReceiver


def ended_jobs(client: Client, ids: list[str]) -> dict[str, dict]:
    """Each job once it has ended, as GET /agent/job/{id} shows it: read one at a time, so
    that the reads hardly load the service while it drains."""
    return {job_id: client.ended(job_id, timeout=600, interval=0.2) for job_id in ids}


def wait_until(condition, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


def latencies(receiver: WebhookReceiver, ids: list[str], jobs: dict[str, dict]) -> list[float]:
    """Seconds from each job's ``finished_at`` to the first arrival of its event."""
    first: dict[str, float] = {}
    for got in receiver.received:
        first.setdefault(json.loads(got.body)["data"]["job_id"], got.at)
    return sorted(
        first[i] - datetime.fromisoformat(jobs[i]["finished_at"]).timestamp() for i in ids
    )


def all_arrived(receiver: WebhookReceiver, count: int) -> bool:
    return len({r.headers["webhook-id"] for r in receiver.received}) >= count


def run(
    tree: Path, runtime_url: str, jobs: int, receiver: WebhookReceiver | None, paced: int
) -> dict:
    """One service of ``tree``: start the jobs, drain them, return its figures; with a
    receiver, then ``paced`` jobs more, one at a time, on the idle cluster."""
    with contextlib.ExitStack() as stack:
        db_url = stack.enter_context(postgres_database())
        env = service_env(
            db_url,
            runtime_url=runtime_url,
            var_dir=stack.enter_context(temp_dir()),
            tree=tree,
            Q_WORKERS=2,
            AGENT_MODEL=MODEL,
            EMBEDDING_BACKEND="none",
            WEBHOOK_ALLOW_PRIVATE=1,
        )
        manage(env, "migrate", "--no-input")
        key = create_api_key(env, name="bench", scopes="agent")
        server = stack.enter_context(gunicorn(env))
        if receiver is not None:
            receiver.received.clear()
        webhook = receiver.url if receiver is not None else None
        client = Client(server.url, key)
        ids = [client.start(webhook) for _ in range(jobs)]
        with qcluster(env):
            ended = ended_jobs(client, ids)
            paced_ids: list[str] = []
            if receiver is not None:
                wait_until(lambda: all_arrived(receiver, jobs), timeout=600, what="every event")
                for _ in range(paced):
                    paced_ids.append(client.start(webhook))
                    time.sleep(0.2)
                ended.update(ended_jobs(client, paced_ids))
                wait_until(
                    lambda: all_arrived(receiver, jobs + paced),
                    timeout=600,
                    what="every paced event",
                )
    mine = [ended[i] for i in ids]
    span = seconds_between(
        min((job["started_at"] for job in mine), key=datetime.fromisoformat),
        max((job["finished_at"] for job in mine), key=datetime.fromisoformat),
    )
    failed = sum(job["status"] != "finished" for job in mine)
    figures = {"jobs/s": round(len(ids) / span, 1), "failed": failed}
    if receiver is not None:
        backlog = latencies(receiver, ids, ended)
        figures["backlog p50 ms"] = round(percentile(backlog, 50) * 1000, 1)
        figures["backlog p99 ms"] = round(percentile(backlog, 99) * 1000, 1)
        steady = latencies(receiver, paced_ids, ended)
        figures["paced p50 ms"] = round(percentile(steady, 50) * 1000, 1)
        figures["paced p99 ms"] = round(percentile(steady, 99) * 1000, 1)
        figures["events"] = len(backlog) + len(steady)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--paced", type=int, default=100, help="jobs started 5/s after the drain (webhooks)"
    )
    args = parser.parse_args(argv)
    results: dict[str, list[dict]] = {}
    with contextlib.ExitStack() as stack:
        base, worktree = stack.enter_context(checkout(args.base))
        runtime = stack.enter_context(runtime_process())
        receiver = WebhookReceiver().start()
        stack.callback(receiver.stop)
        services = [
            (f"{base} (before)", worktree, None),
            ("this tree", PROJECT_DIR, None),
            ("this tree, webhooks", PROJECT_DIR, receiver),
        ]
        for round_ in range(args.rounds):
            order = services if round_ % 2 == 0 else services[::-1]
            for name, tree, hook in order:
                figures = run(tree, runtime.url, args.jobs, hook, args.paced)
                results.setdefault(name, []).append(figures)
                print(f"round {round_ + 1}: {name}: {figures}", flush=True)
    rows = []
    before = statistics.median(r["jobs/s"] for r in results[f"{base} (before)"])
    latency = ("backlog p50 ms", "backlog p99 ms", "paced p50 ms", "paced p99 ms")
    for name, runs in results.items():
        rate = statistics.median(r["jobs/s"] for r in runs)
        rows.append(
            [
                name,
                rate,
                round(rate / before, 2),
                *(statistics.median(r.get(k, 0) for r in runs) or "" for k in latency),
                sum(r["failed"] for r in runs),
            ]
        )
    print(f"\n{args.jobs} jobs per run, {args.rounds} rounds, PostgreSQL, 2 workers (medians):")
    print(
        table(
            ["service", "jobs/s", "vs before", *latency, "failed"],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
