"""The body checks at the edge of ``POST /api.php``, timed from a client.

    .venv/bin/python bench/edge.py [--rounds 7] [--requests 200]

Every ``/api.php`` body is parsed (a depth limit, no NaN), its key is checked, and its
values are walked for what cannot be stored (NUL, unpaired surrogates, infinite numbers)
before the model is called. This sends, to the production server (deploy/gunicorn.conf.py)
on SQLite in front of a loopback runtime that answers at once, for a usual body and for one
with a 1 MB prompt:

* ``unparsable``: the body broken at its last byte, refused after the whole parse (400
  ``invalid_json``);
* ``unstorable``: a valid body whose prompt ends with a NUL, refused after the parse, the
  key and the walk (400 ``validation_error``);
* ``answered`` (usual body only): the whole call, 200.

Rounds take turns between the kinds, on one keep-alive connection; printed: the median of
the rounds' medians in ms, and unstorable / unparsable (what the key and the walk add to a
refusal that had to parse the body anyway).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    MODEL,
    create_api_key,
    gunicorn,
    manage,
    runtime_process,
    service_env,
    sqlite_database,
    table,
    temp_dir,
)

USUAL_PROMPT = "The capital of France is"
LARGE_PROMPT = "word " * 200_000


def bodies(key: str) -> dict[tuple[str, str], tuple[bytes, int]]:
    """``(size, kind) -> (body, the status it must answer)``."""
    found = {}
    for size, prompt in (("usual", USUAL_PROMPT), ("1 MB prompt", LARGE_PROMPT)):
        body = {"api_key": key, "model": MODEL, "prompt": prompt, "options": {"num_predict": 16}}
        valid = json.dumps(body).encode()
        found[size, "unparsable"] = (valid[:-1] + b",", 400)
        found[size, "unstorable"] = (json.dumps({**body, "prompt": prompt + "\0"}).encode(), 400)
        if size == "usual":
            found[size, "answered"] = (valid, 200)
    return found


def timed(conn: http.client.HTTPConnection, body: bytes, status: int, requests: int) -> float:
    """The median ms of ``requests`` POSTs of ``body``, each of which must answer ``status``."""
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        conn.request("POST", "/api.php", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = response.read()
        times.append((time.perf_counter() - started) * 1000)
        if response.status != status:
            raise RuntimeError(f"/api.php answered {response.status}: {answer[:300]!r}")
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=200, help="per round, usual bodies")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        runtime = stack.enter_context(runtime_process())
        env = service_env(
            stack.enter_context(sqlite_database()),
            runtime_url=runtime.url,
            var_dir=stack.enter_context(temp_dir()),
        )
        manage(env, "migrate", "--no-input")
        server = stack.enter_context(gunicorn(env, None))
        cases = bodies(create_api_key(env, name="bench"))
        host, port = server.url.removeprefix("http://").split(":")
        conn = stack.enter_context(contextlib.closing(http.client.HTTPConnection(host, int(port))))
        medians: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
        for round_number in range(args.rounds + 1):  # the first round warms up
            for (size, kind), (body, status) in cases.items():
                requests = args.requests if size == "usual" else max(1, args.requests // 20)
                median = timed(conn, body, status, requests)
                if round_number:
                    medians[size, kind].append(median)
    rows = []
    for size in ("usual", "1 MB prompt"):
        figure = {kind: statistics.median(medians[size, kind]) for (s, kind) in cases if s == size}
        rows.append(
            [
                size,
                round(figure["unparsable"], 2),
                round(figure["unstorable"], 2),
                round(figure["unstorable"] / figure["unparsable"], 2),
                round(figure["answered"], 2) if "answered" in figure else "-",
            ]
        )
    print(
        f"POST /api.php, production server on SQLite, {args.rounds} rounds"
        f" (medians of the rounds' medians, ms)"
    )
    print(table(["body", "unparsable", "unstorable", "unstorable / unparsable", "answered"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
