"""``POST /api.php`` of an earlier commit against the working tree, in one run.

    .venv/bin/python bench/compare.py --base REV [--base REV2] [--database postgres] [--rounds 6]

A change's effect on speed, as a ratio measured in one run: the commit REV (checked out
in a temporary git worktree; ``--base`` again for more) and this working tree each run
their own production server
(their deploy/gunicorn.conf.py) on a database of their own, in front of the same loopback runtime,
and the rounds go back and forth between them, so that the shared machine's slow spells
fall on all. It prints, for each, the best and median p50 latency at concurrency 1 and
requests/s at concurrency 16, and the ratios of the medians (after / each earlier commit); and, at
concurrency 1, the CPU milliseconds each request cost the service's processes and its
database's server processes (PostgreSQL), which a busy machine moves far less than it moves
latency. Both trees run on this venv's packages.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    check_answer,
    checkout,
    cpu_seconds,
    create_api_key,
    gunicorn,
    manage,
    postgres_backends,
    process_tree,
    run_load,
    runtime_process,
    service_env,
    temp_dir,
)
from bench.gateway import PROMPT


@dataclass(frozen=True)
class Service:
    url: str
    body: dict
    pid: int  # gunicorn's master: its workers are its descendants
    database: str  # the database's name (its server processes are counted on PostgreSQL)

    def cpu(self) -> float:
        """CPU seconds used so far by the service's processes and its database's backends."""
        pids = process_tree(self.pid) + postgres_backends(self.database)
        return sum(cpu_seconds(pids).values())


def serve(tree: Path, runtime_url: str, database: str, stack: contextlib.ExitStack) -> Service:
    """The service of ``tree`` under gunicorn, warmed up."""
    database_url = stack.enter_context(DATABASES[database]())
    env = service_env(
        database_url,
        runtime_url=runtime_url,
        var_dir=stack.enter_context(temp_dir()),
        tree=tree,
    )
    manage(env, "migrate", "--no-input")
    body = {"api_key": create_api_key(env, name="bench"), "model": MODEL, "prompt": PROMPT}
    server = stack.enter_context(gunicorn(env, None))
    url = f"{server.url}/api.php"
    check_answer(url, body)
    run_load(url, body, concurrency=16, requests=1000, seconds=3)
    return Service(url, body, server.pid, urlsplit(database_url).path.lstrip("/"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", required=True, action="append", help="an earlier commit (any git revision)"
    )
    parser.add_argument("--database", default="postgres", choices=tuple(DATABASES))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0, help="cap of seconds per run")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        trees = dict(
            (f"before ({base})", worktree)
            for base, worktree in (stack.enter_context(checkout(rev)) for rev in args.base)
        )
        trees["after (working tree)"] = PROJECT_DIR
        runtime = stack.enter_context(runtime_process())
        services = {
            label: serve(tree, runtime.url, args.database, stack) for label, tree in trees.items()
        }
        single: dict[str, list[float]] = {label: [] for label in services}
        cpu: dict[str, list[float]] = {label: [] for label in services}
        loaded: dict[str, list[float]] = {label: [] for label in services}
        for _ in range(args.rounds):
            for label, service in services.items():
                runs = dict(requests=5000, seconds=args.seconds)
                used = service.cpu()
                one = run_load(service.url, service.body, concurrency=1, **runs)
                single[label].append(one.p50_ms)
                cpu[label].append((service.cpu() - used) * 1000 / max(one.requests, 1))
                loaded[label].append(
                    run_load(service.url, service.body, concurrency=16, **runs).rps
                )
    print(f"POST /api.php on {args.database}, {args.rounds} alternating rounds (times in ms)")
    for label in services:
        print(
            f"{label:24s} c=1 p50 best {min(single[label]):.2f} median "
            f"{statistics.median(single[label]):.2f}, CPU/request median "
            f"{statistics.median(cpu[label]):.2f} | c=16 req/s best {max(loaded[label]):.0f} "
            f"median {statistics.median(loaded[label]):.0f}"
        )
    *befores, after = services
    for before in befores:

        def ratio(figures: dict[str, list[float]], before: str = before) -> float:
            return statistics.median(figures[after]) / statistics.median(figures[before])

        print(
            f"after / {before}, medians: c=1 p50 {ratio(single):.2f}, c=1 CPU/request "
            f"{ratio(cpu):.2f}, c=16 req/s {ratio(loaded):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
