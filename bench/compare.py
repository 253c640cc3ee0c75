"""``POST /api.php`` of an earlier commit against the working tree, in one run.

    .venv/bin/python bench/compare.py --base REV [--database postgres] [--rounds 6]

A change's effect on speed, as a ratio measured in one run: the commit REV (checked out
in a temporary git worktree) and this working tree each run their own production server
(their deploy/gunicorn.conf.py) on a database of their own, in front of the same loopback runtime,
and the rounds go back and forth between them, so that the shared machine's slow spells
fall on both. It prints, for each, the best and median p50 latency at concurrency 1 and
requests/s at concurrency 16, and the ratios of the medians (after / before). Both trees
run on this venv's packages.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    check_answer,
    checkout,
    create_api_key,
    gunicorn,
    manage,
    run_load,
    runtime_process,
    service_env,
    temp_dir,
)
from bench.gateway import PROMPT


def serve(tree: Path, runtime_url: str, database: str, stack: contextlib.ExitStack) -> tuple:
    """The service of ``tree`` under gunicorn, warmed up; returns its URL and request body."""
    env = service_env(
        stack.enter_context(DATABASES[database]()),
        runtime_url=runtime_url,
        var_dir=stack.enter_context(temp_dir()),
        tree=tree,
    )
    manage(env, "migrate", "--no-input")
    body = {"api_key": create_api_key(env, name="bench"), "model": MODEL, "prompt": PROMPT}
    url = f"{stack.enter_context(gunicorn(env, None)).url}/api.php"
    check_answer(url, body)
    run_load(url, body, concurrency=16, requests=1000, seconds=3)
    return url, body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--database", default="postgres", choices=tuple(DATABASES))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0, help="cap of seconds per run")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        base, worktree = stack.enter_context(checkout(args.base))
        runtime = stack.enter_context(runtime_process())
        trees = {f"before ({base})": worktree, "after (working tree)": PROJECT_DIR}
        services = {
            label: serve(tree, runtime.url, args.database, stack) for label, tree in trees.items()
        }
        single: dict[str, list[float]] = {label: [] for label in services}
        loaded: dict[str, list[float]] = {label: [] for label in services}
        for _ in range(args.rounds):
            for label, (url, body) in services.items():
                runs = dict(requests=5000, seconds=args.seconds)
                single[label].append(run_load(url, body, concurrency=1, **runs).p50_ms)
                loaded[label].append(run_load(url, body, concurrency=16, **runs).rps)
    print(f"POST /api.php on {args.database}, {args.rounds} alternating rounds (times in ms)")
    for label in services:
        print(
            f"{label:24s} c=1 p50 best {min(single[label]):.2f} median "
            f"{statistics.median(single[label]):.2f} | c=16 req/s best {max(loaded[label]):.0f} "
            f"median {statistics.median(loaded[label]):.0f}"
        )
    before, after = services
    print(
        "after / before, medians: c=1 p50 "
        f"{statistics.median(single[after]) / statistics.median(single[before]):.2f}, "
        f"c=16 req/s {statistics.median(loaded[after]) / statistics.median(loaded[before]):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
