"""Load test of the production server on PostgreSQL: 100 clients for 60 s on ``/api.php``,
then 100 clients starting chats and polling their status.

    .venv/bin/python bench/load.py [--clients 100] [--seconds 60] [--settle 60]
                                   [--terminate-every SECONDS]

It creates a throwaway PostgreSQL database, runs the production server (gunicorn with
deploy/gunicorn.conf.py: ``config.asgi`` in uvicorn workers, DEBUG=0) and a ``qcluster``
(2 workers, the database broker), in front of loopback model runtimes that answer at once,
and prints for each phase: requests, 5xx answers (target 0), other failures (connection
errors, 4xx), p50 and p99 in ms, and requests per second;
for the chat phase also the chats finished and, ``--settle`` seconds after the load, the
jobs still not terminal (target 0). ``--terminate-every S`` has PostgreSQL drop every
connection of the service every S seconds during the load (``pg_terminate_backend``).

Hostile input beside the load:

* ``--hostile N`` runs the chat phase twice, without and then with N tasks whose
  arithmetic would hold a worker for minutes (``What is (((9**99)**99)**99)**99?``) started
  as it begins, and prints for each the chats' wait beyond their own model time (from start
  to end, less the model calls: mostly their time in the queue behind the other clients'),
  p50, p99 and max (target: the hostile tasks add at most 5 s to the longest).
* ``--slow-sockets N`` runs the ``/api.php`` phase twice, without and then beside N sockets
  (from 127.0.0.2) that send a request line and one header and then nothing, opened again
  whenever the server closes one; prints both and the ratio of the p99s (target at most 2).

The clients are threads with keep-alive connections, spread over processes; a chat client
starts a chat on its own conversation, then polls ``GET /agent/job/{id}`` every 0.2 s until
the job ends (or the load is over), and starts the next one.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import resource
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    MODEL,
    TERMINATE_EVERY_CONNECTION,
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

TERMINAL = ("finished", "failed", "cancelled")
HOSTILE_TASK = "What is (((9**99)**99)**99)**99?"
SLOW_SOURCE = "127.0.0.2"  # the slow sockets' address: the server limits each address


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def slow_sockets(port: int, count: int, stop: threading.Event) -> None:
    """Holds ``count`` connections that send a request line and one header, then nothing;
    one the server closes is opened again (after a pause, not in a tight loop)."""
    import selectors
    import socket

    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 256, count + 256))
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), 5, (SLOW_SOURCE, 0))
            sock.sendall(b"POST /api.php HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        except OSError:
            time.sleep(0.05)

    for _ in range(count):
        open_one()
    while not stop.is_set():
        for key, _ in selector.select(timeout=0.5):
            selector.unregister(key.fileobj)
            key.fileobj.close()
            time.sleep(0.01)
            open_one()
    for key in list(selector.get_map().values()):
        key.fileobj.close()


POLL_SECONDS = 0.2
PROCESSES = 4


@dataclass
class Tally:
    """What the clients of one process saw."""

    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[tuple[str, int], int] = field(default_factory=dict)  # 0: no answer
    chats_finished: int = 0
    # Each finished chat's seconds from its start to its end, less its model calls.
    waits: list[float] = field(default_factory=list)

    def add_wait(self, job: dict) -> None:
        if not job.get("finished_at"):
            return
        total = (_when(job["finished_at"]) - _when(job["created_at"])).total_seconds()
        model = sum(s["elapsed"] or 0 for s in job["steps"] if s["kind"] == "model_call")
        self.waits.append(total - model)

    def add(self, kind: str, status: int, started: float) -> None:
        self.latencies_ms.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        self.statuses[kind, status] = self.statuses.get((kind, status), 0) + 1

    def merge(self, other: Tally) -> None:
        for kind, values in other.latencies_ms.items():
            self.latencies_ms.setdefault(kind, []).extend(values)
        for key, count in other.statuses.items():
            self.statuses[key] = self.statuses.get(key, 0) + count
        self.chats_finished += other.chats_finished
        self.waits += other.waits


class Client:
    """One keep-alive connection; reconnects after a connection error."""

    def __init__(self, base_url: str, key: str, tally: Tally) -> None:
        self.host, port = base_url.removeprefix("http://").split(":")
        self.port = int(port)
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        self.tally = tally
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def call(self, kind: str, method: str, path: str, body: dict | None = None) -> dict | None:
        started = time.perf_counter()
        try:
            self.conn.request(method, path, json.dumps(body) if body else None, self.headers)
            response = self.conn.getresponse()
            data = json.loads(response.read())
        except (OSError, http.client.HTTPException, ValueError):
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            self.tally.add(kind, 0, started)
            return None
        self.tally.add(kind, response.status, started)
        return data if response.status == 200 else None


def model_client(client: Client, key: str, deadline: float, index: int) -> None:
    body = {"api_key": key, "model": MODEL, "prompt": "Say something short."}
    while time.monotonic() < deadline:
        client.call("api.php", "POST", "/api.php", body)


def chat_client(client: Client, key: str, deadline: float, index: int) -> None:
    body = {"source": "load", "scope_type": "client", "scope_id": index, "prompt": "Hello!"}
    while time.monotonic() < deadline:
        started = client.call("chat start", "POST", "/agent/chat", body)
        if started is None:
            continue
        job_id = started["data"]["job_id"]
        while time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            status = client.call("job status", "GET", f"/agent/job/{job_id}")
            if status is not None and status["data"]["status"] in TERMINAL:
                client.tally.chats_finished += 1
                client.tally.add_wait(status["data"])
                break


def run_clients(args: tuple[str, str, str, list[int], float]) -> Tally:
    """The clients ``indexes`` of one process, each in a thread, until ``deadline``."""
    phase, base_url, key, indexes, seconds = args
    deadline = time.monotonic() + seconds
    loop = model_client if phase == "api.php" else chat_client
    tally = Tally()
    threads = [
        threading.Thread(target=loop, args=(Client(base_url, key, tally), key, deadline, i))
        for i in indexes
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tally


def terminate_connections(db_url: str, every: float, stop: threading.Event) -> list[int]:
    """Every ``every`` seconds, has PostgreSQL drop every connection to the database."""
    import psycopg

    dropped: list[int] = []
    with psycopg.connect(db_url, autocommit=True) as conn:
        while not stop.wait(every):
            row = conn.execute(TERMINATE_EVERY_CONNECTION).fetchone()
            dropped.append(row[0])
    return dropped


def load(phase: str, base_url: str, key: str, args, db_url: str) -> tuple[Tally, float, list]:
    shares = [list(range(args.clients))[i::PROCESSES] for i in range(PROCESSES)]
    stop, dropped = threading.Event(), []
    dropper = None
    if args.terminate_every:
        dropper = threading.Thread(
            target=lambda: dropped.extend(terminate_connections(db_url, args.terminate_every, stop))
        )
        dropper.start()
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(PROCESSES) as pool:
        tallies = pool.map(
            run_clients, [(phase, base_url, key, share, args.seconds) for share in shares]
        )
    elapsed = time.perf_counter() - started
    stop.set()
    if dropper is not None:
        dropper.join()
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total, elapsed, dropped


def start_hostile_tasks(base_url: str, key: str, count: int) -> None:
    client = Client(base_url, key, Tally())
    for index in range(count):
        task = {"source": "load", "scope_type": "hostile", "scope_id": index}
        client.call("hostile", "POST", "/agent/job/start", {**task, "task": HOSTILE_TASK})


def not_terminal(base_url: str) -> int:
    """Jobs queued, running or cancelling now: the ``llmgw_jobs`` gauge of ``GET /metrics``
    (read from the database at each scrape; loopback may read it)."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET /metrics answered {response.status}: {text[:300]}")
    return round(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("llmgw_jobs{")
        )
    )


def rows_of(phase: str, tally: Tally, elapsed: float) -> list[list[object]]:
    rows = []
    for kind, values in sorted(tally.latencies_ms.items()):
        values.sort()
        statuses = {st: n for (k, st), n in tally.statuses.items() if k == kind}
        rows.append(
            [
                f"{phase}: {kind}",
                len(values),
                round(percentile(values, 50), 1),
                round(percentile(values, 99), 1),
                round(len(values) / elapsed, 1),
                sum(n for st, n in statuses.items() if st >= 500),
                sum(n for st, n in statuses.items() if st != 200 and st < 500),
            ]
        )
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0, help="of each phase")
    parser.add_argument("--settle", type=float, default=60.0, help="wait before counting jobs")
    parser.add_argument("--terminate-every", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--hostile", type=int, default=0, metavar="N", help="hostile tasks")
    parser.add_argument("--slow-sockets", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    if min(args.clients, args.seconds) <= 0 or args.settle < 0 or args.terminate_every < 0:
        parser.error("--clients and --seconds must be positive")
    return args


def server_errors(server) -> list[str]:
    """The server's error lines and tracebacks: what to read when a 5xx was counted."""
    errors, in_traceback = [], False
    for line in server.output.read_text(errors="replace").splitlines():
        if line.startswith("Traceback"):
            in_traceback = True
        elif in_traceback and not line.startswith(" "):
            in_traceback = False
            errors.append(line)  # the exception itself
        if in_traceback or "ERROR" in line:
            errors.append(line)
    return errors


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    drops = f", every connection dropped every {args.terminate_every:g} s" * bool(
        args.terminate_every
    )
    print(
        f"load: {args.clients} clients x {args.seconds:g} s per phase; the production server "
        f"(2 uvicorn workers) and a qcluster with 2 workers on PostgreSQL; "
        f"{os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}{drops}; times in ms"
    )
    with (
        runtime_process(models=(MODEL,)) as fast,
        runtime_process(models=(MODEL,), kind="tests") as full,
        postgres_database() as db_url,
        temp_dir("llmgw-bench-var-") as var_dir,
    ):
        # /api.php calls the fast runtime; the agents' profile model lives on the full one
        # (streaming, tokenizer), routed by AGENT_MODEL's default endpoint.
        env = service_env(db_url, runtime_url=fast.url, var_dir=var_dir, Q_WORKERS=2)
        chat_env = {**env, "MODEL_RUNTIME_URL": full.url, "AGENT_MODEL": MODEL}
        manage(chat_env, "migrate", "--no-input")
        key = create_api_key(env, name="load", scopes="model,agent")
        rows, dropped, errors, p99s = [], [], [], []
        with gunicorn(env, config=None) as server:
            tally, elapsed, drop = load("api.php", server.url, key, args, db_url)
            rows += rows_of("api.php", tally, elapsed)
            dropped += drop
            if args.slow_sockets:
                p99s.append(rows[-1][3])
                stop = threading.Event()
                port = int(server.url.rsplit(":", 1)[1])
                holder = threading.Thread(target=slow_sockets, args=(port, args.slow_sockets, stop))
                holder.start()
                time.sleep(3)  # the sockets are open
                tally, elapsed, drop = load("api.php", server.url, key, args, db_url)
                stop.set()
                holder.join()
                rows += rows_of(f"api.php beside {args.slow_sockets} slow sockets", tally, elapsed)
                p99s.append(rows[-1][3])
            errors += server_errors(server)
        waits = []  # per chat phase: each chat's wait beyond its model time
        with gunicorn(chat_env, config=None) as server, qcluster(chat_env):
            for hostile in sorted({0, args.hostile}):
                start_hostile_tasks(server.url, key, hostile)
                tally, elapsed, drop = load("chat", server.url, key, args, db_url)
                phase = f"chat beside {hostile} hostile tasks" if hostile else "chat"
                rows += rows_of(phase, tally, elapsed)
                dropped += drop
                waits.append(sorted(tally.waits) or [0.0])
                time.sleep(args.settle)
            waiting = not_terminal(server.url)
            errors += server_errors(server)
    print(table(["phase", "requests", "p50", "p99", "req/s", "5xx", "other failures"], rows))
    print(f"chats finished during the load: {tally.chats_finished}")
    if dropped:
        print(f"connections terminated: {len(dropped)} times, {sum(dropped)} connections")
    five_xx = sum(int(row[5] or 0) for row in rows)
    if five_xx:
        print("the server's errors:", *errors[-60:] or ["(none logged)"], sep="\n  ")
    print(f"jobs not terminal {args.settle:g} s after the load: {waiting}")
    met = five_xx == 0 and waiting == 0
    targets = f"targets: 5xx {five_xx} (0), jobs not terminal {waiting} (0)"
    if args.hostile:
        for hostile, phase_waits in zip((0, args.hostile), waits, strict=True):
            print(
                f"beside {hostile} hostile tasks, a chat's wait beyond its model time (s): "
                f"p50 {percentile(phase_waits, 50):.2f}, p99 {percentile(phase_waits, 99):.2f}, "
                f"max {phase_waits[-1]:.2f}"
            )
        added = waits[1][-1] - waits[0][-1]
        met = met and added <= 5
        targets += f", longest wait added by the hostile tasks {added:.2f} s (5)"
    if args.slow_sockets:
        ratio = p99s[1] / max(p99s[0], 0.001)
        print(f"/api.php p99 beside {args.slow_sockets} slow sockets / without: {ratio:.2f}")
        met = met and ratio <= 2
        targets += f", p99 ratio {ratio:.2f} (2)"
    print(f"{targets} -- " + ("met" if met else "MISSED"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
