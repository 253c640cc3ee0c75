"""Instructions per request in the service's own process, counted by callgrind.

    .venv/bin/python bench/instructions.py [--requests N] [--databases sqlite,postgres]

Wall-clock figures on a shared machine move with its other tenants (the same loop of
Python takes 34 ms or 68 ms here from one second to the next); an instruction count does
not. For each database this migrates a throwaway database, makes a key, and runs
``POST /api.php`` (against the loopback runtime of bench/gateway.py) and ``GET /healthz``
N times each through Django's WSGI handler inside one process under
``valgrind --tool=callgrind``, counting only the requests (warm-up excluded). It prints
instructions per request of both and their ratio: what the gateway adds to the cost of
the smallest request Django can answer. Compare two commits by running it on each.

Needs valgrind (on every machine kind here). A run takes about a minute.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    create_api_key,
    manage,
    python,
    runtime_process,
    service_env,
    table,
    temp_dir,
)
from bench.gateway import PROMPT

WARM_UP = 50


def _environ(method: str, path: str, body: bytes) -> dict:
    return {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": "127.0.0.1",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }


def measured_process(requests: int) -> None:
    """Runs under callgrind: the requests, with collection on only around them."""
    import django

    django.setup()
    from django.core.handlers.wsgi import WSGIHandler

    app = WSGIHandler()
    api_body = json.dumps(
        {"api_key": os.environ["BENCH_KEY"], "model": MODEL, "prompt": PROMPT}
    ).encode()

    def call(method: str, path: str, body: bytes) -> None:
        statuses: list[str] = []
        response = app(
            _environ(method, path, body), lambda status, headers: statuses.append(status)
        )
        content = b"".join(response)
        response.close()
        if not statuses[0].startswith("200"):
            raise SystemExit(f"{method} {path} answered {statuses[0]}: {content[:300]!r}")

    def counted(label: str, method: str, path: str, body: bytes) -> None:
        for _ in range(WARM_UP):
            call(method, path, body)
        control = ["callgrind_control", "--instr=on", str(os.getpid())]
        subprocess.run(control, check=True, capture_output=True)
        for _ in range(requests):
            call(method, path, body)
        control[1] = "--instr=off"
        subprocess.run(control, check=True, capture_output=True)
        # Each part's counts go to a file of their own.
        subprocess.run(
            ["callgrind_control", f"--dump={label}", str(os.getpid())],
            check=True,
            capture_output=True,
        )

    counted("api", "POST", "/api.php", api_body)
    counted("healthz", "GET", "/healthz", b"")


def _totals(out_dir: Path) -> dict[str, int]:
    """Instructions of each labelled dump (``callgrind_control --dump=<label>``)."""
    totals: dict[str, int] = {}
    for path in out_dir.glob("callgrind.out*"):
        lines = path.read_text(errors="replace").splitlines()
        trigger = next((ln for ln in lines if ln.startswith("desc: Trigger: dump ")), None)
        total = next((ln.split()[1] for ln in lines if ln.startswith("totals:")), None)
        if trigger is not None and total is not None:
            totals[trigger.removeprefix("desc: Trigger: dump ").strip()] = int(total)
    return totals


def count(name: str, runtime_url: str, requests: int) -> dict[str, float]:
    with DATABASES[name]() as database_url, temp_dir() as var_dir:
        env = service_env(database_url, runtime_url=runtime_url, var_dir=var_dir)
        manage(env, "migrate", "--no-input")
        env["BENCH_KEY"] = create_api_key(env, name="bench", rate_limit=0)
        out_dir = var_dir / "callgrind"
        out_dir.mkdir()
        print(f"[{name}] {requests} requests of each kind under callgrind", file=sys.stderr)
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out_dir}/callgrind.out.%p",
                python(),
                __file__,
                "--measured-process",
                str(requests),
            ],
            cwd=PROJECT_DIR,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        totals = _totals(out_dir)
    if set(totals) != {"api", "healthz"}:
        raise RuntimeError(f"callgrind wrote no counts for {name}: {totals}")
    return {label: total / requests for label, total in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="counted requests of each kind")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--measured-process", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measured_process:
        measured_process(args.measured_process)
        return 0
    if not shutil.which("valgrind"):
        parser.error("valgrind is not installed")
    unknown = set(args.databases.split(",")) - set(DATABASES)
    if unknown or args.requests <= 0:
        parser.error("--databases takes sqlite and/or postgres; --requests must be positive")
    rows = []
    with runtime_process(models=(MODEL,)) as runtime:
        for name in args.databases.split(","):
            per_request = count(name, runtime.url, args.requests)
            rows.append(
                [
                    name,
                    round(per_request["api"] / 1e6, 3),
                    round(per_request["healthz"] / 1e6, 3),
                    round(per_request["api"] / per_request["healthz"], 2),
                ]
            )
    print(
        f"instructions per request in the service process (callgrind; {args.requests} "
        f"requests of each kind after {WARM_UP} unmeasured; millions)"
    )
    print(table(["database", "POST /api.php", "GET /healthz", "ratio"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
