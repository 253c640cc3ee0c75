"""The OpenAI-compatible face (``POST /v1/chat/completions``) beside LiteLLM's proxy, in
one command.

    .venv/bin/python bench/openai_face.py [--litellm-venv var/litellm-venv] [--calls 200]
                                          [--rounds 3] [--clients 256] [--seconds 20]

One loopback runtime (``bench.common``'s fast Ollama stub, its own process) answers
``bench-instant`` at once and holds every call of ``bench-model`` for ``--hold`` s. In
front of it, each on its production settings: this working tree (``deploy/gunicorn.conf.py``,
``WEB_CONCURRENCY=2``, DEBUG=0, PostgreSQL, Redis), its ``/v1/chat/completions`` on
Ollama's ``/api/chat``; LiteLLM's proxy (2 workers, from the virtualenv ``--litellm-venv``:
``python3 -m venv var/litellm-venv && var/litellm-venv/bin/pip install 'litellm[proxy]'``),
its ``/v1/chat/completions`` routed to the same runtime's ``/api/chat`` (``ollama_chat/``).

Printed, side by side:

1. overhead at one client: ``--calls`` sequential instant calls on one keep-alive
   connection to each server and to the runtime directly, the servers taking turns for
   ``--rounds`` rounds; the p50 of each minus the direct call's p50 (the median over the
   rounds), and the ratio of ours to LiteLLM's (goal <= 0.35);
2. streaming: the same with ``stream: true``; the time to the first chunk that carries text,
   minus the direct stream's (goal: ours <= 5 ms at p50);
3. ``--clients`` clients in a closed loop for ``--seconds``, each call held ``--hold`` s
   (``bench/inflight.py``'s load: wrk when installed): req/s, p50, p99 and errors, and the
   ratio of req/s (goal >= 1.8, p50 <= 1.3 s, no errors).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import wrkload
from bench.common import PROJECT_DIR, percentile, runtime_process, table
from bench.inflight import INSTANT, MODEL, Target, chat_body, litellm, load_rows, service


def face(runtime_url: str, stack: contextlib.ExitStack) -> Target:
    """This working tree's server, as :func:`bench.inflight.service` runs it, called on
    ``/v1/chat/completions`` with a key of its own."""
    api = service("OpenAI face (this tree)", PROJECT_DIR, runtime_url, stack)
    return Target(
        api.label,
        api.url.removesuffix("/api.php") + "/v1/chat/completions",
        chat_body(MODEL),
        chat_body(INSTANT),
        {"Authorization": f"Bearer {api.body['api_key']}"},
        api.pid,
        api.env,
    )


def direct(runtime_url: str) -> Target:
    """The runtime itself, Ollama's ``/api/chat``."""
    body = {**chat_body(INSTANT), "stream": False}
    return Target("runtime, direct", f"{runtime_url}/api/chat", body, body, {})


def timed_calls(target: Target, count: int, *, stream: bool) -> list[float]:
    """Seconds of ``count`` instant calls on one keep-alive connection: until the whole
    answer, or with ``stream`` until the first chunk that carries the answer's text."""
    parts = urlsplit(target.url)
    body = {**target.probe, "stream": stream}
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **target.headers}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    times = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            conn.request("POST", parts.path, payload, headers)
            response = conn.getresponse()
            if response.status != 200:
                raise RuntimeError(f"{target.label}: {response.status} {response.read()[:300]!r}")
            first = None
            if stream:
                while first is None:
                    line = response.readline()
                    if not line:
                        raise RuntimeError(f"{target.label}: the stream ended without text")
                    if b"echo:" in line:
                        first = time.perf_counter() - started
            response.read()
            times.append(first if stream else time.perf_counter() - started)
    finally:
        conn.close()
    return sorted(times)


def overhead_rows(targets: list[Target], calls: int, rounds: int, *, stream: bool) -> list[list]:
    """Per server: p50 and p99 (ms), and the p50 minus the direct call's (the median over
    the rounds), the servers and the runtime taking turns."""
    by: dict[str, list[list[float]]] = {t.label: [] for t in targets}
    for target in targets:  # connections made, code loaded
        timed_calls(target, 20, stream=stream)
    for _ in range(rounds):
        for target in targets:
            by[target.label].append(timed_calls(target, calls, stream=stream))
    base = [percentile(times, 50) for times in by[targets[0].label]]
    rows = []
    for target in targets:
        runs = by[target.label]
        p50 = statistics.median(percentile(t, 50) for t in runs)
        p99 = statistics.median(percentile(t, 99) for t in runs)
        over = statistics.median(percentile(t, 50) - b for t, b in zip(runs, base, strict=True))
        rows.append(
            [target.label, round(p50 * 1000, 2), round(p99 * 1000, 2), round(over * 1000, 2)]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--litellm-venv", type=Path, default=PROJECT_DIR / "var/litellm-venv")
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--hold", type=float, default=1.0, help="seconds a held call takes")
    parser.add_argument(
        "--load", choices=("wrk", "asyncio"), default="wrk" if wrkload.available() else "asyncio"
    )
    args = parser.parse_args(argv)
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with contextlib.ExitStack() as stack:
        runtime = stack.enter_context(
            runtime_process(models=(f"{MODEL}={args.hold}", f"{INSTANT}=0"))
        )
        ours = face(runtime.url, stack)
        theirs = stack.enter_context(litellm(args.litellm_venv, runtime.url, chat=True))
        servers = [ours, theirs]
        for stream in (False, True):
            rows = overhead_rows(
                [direct(runtime.url), *servers], args.calls, args.rounds, stream=stream
            )
            what = "time to the first text chunk" if stream else "whole answer"
            print(
                f"\n{'Streamed' if stream else 'Whole'} chat completions at one client "
                f"({what}), {args.calls} calls x {args.rounds} rounds, ms:"
            )
            print(table(["server", "p50", "p99", "p50 - direct"], rows))
            ratio = rows[1][3] / rows[2][3] if rows[2][3] > 0 else float("nan")
            print(f"overhead, ours / LiteLLM's: {ratio:.2f}")
        rows = load_rows(servers, [args.clients], args.seconds, args.load)
        print(
            f"\n{args.clients} clients, each call held {args.hold:g} s, {args.seconds:g} s per run,"
            f" load from {args.load}; latencies in s, instant probe in ms, CPU ms per request"
        )
        headers = ["server", "clients", "req/s", "p50", "p99", "errors", "instant p50"]
        print(table([*headers, "CPU ms/req", "machine", "RSS/process", "PSS all"], rows))
        print(f"req/s, ours / LiteLLM's: {rows[0][2] / rows[1][2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
