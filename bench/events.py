"""Job event streams as their clients see them (``GET /agent/job/{id}/events``).

    .venv/bin/python bench/events.py [--latency-jobs 40] [--streams 2000] [--chat-jobs 20]
                                     [--base REV[,REV]] [--throughput-jobs 60] [--rounds 3]
                                     [--cancel-jobs 10] [--parts 1,2,3,4]

Each part runs the production web server (deploy/gunicorn.conf.py, 2 processes) and a
qcluster on a throwaway database, in front of a loopback runtime of this file's own
(``runtime``, its own process) that streams a reply word by word and notes the time each
word leaves it; the clients are aiohttp, reading the streams as server-sent events.

1. **First token**: one task job at a time, its stream opened at once; the time from the
   runtime's first chunk to the client's first ``token`` event, p50 and p99, on SQLite (the
   web processes poll), PostgreSQL (LISTEN/NOTIFY) and PostgreSQL with Redis (pub/sub). A
   task's tokens are the model's text as it comes; a chat's are its cleaned reply, which
   gives a sentence out when the next one starts (part 2 counts from that chunk).
2. **Many streams** (PostgreSQL with Redis): 20 chat jobs queued, 2,000 streams opened on
   them (100 each) from two client processes (from 32 loopback addresses, each under the
   per-address limit; ``GUNICORN_WORKER_CONNECTIONS`` 3,000 so that an uneven share between
   the two web processes is not refused), then the cluster started (2 workers x 10 job
   threads: the 20 jobs at once): the web processes' memory per open stream, every token
   event's delay from the runtime's chunk that released it to its arrival (p50, p99), and an
   instant ``/api.php`` call's p50 meanwhile.
3. **Throughput** (PostgreSQL): chat jobs per second with the reply streamed (no pauses),
   this tree beside ``--base`` (the commits before), in alternating rounds.
4. **Cancel** (PostgreSQL): chats cancelled once their stream showed two tokens; the time
   from the cancel's request to the stream's ``cancelled`` event (the goal: within a second).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATABASES,
    MODEL,
    PROJECT_DIR,
    checkout,
    create_api_key,
    gunicorn,
    manage,
    percentile,
    process_tree,
    qcluster,
    redis_server,
    service_env,
    temp_dir,
)
from bench.stream_runtime import INSTANT, chunk_times, releasing_chunk, runtime

#: Sentences of the reply in part 2 (two chunks each, 50 ms apart: 4 s of tokens per job).
WORDS = 40

TERMINAL = ("finished", "failed", "cancelled")


# --- The service -------------------------------------------------------------------------


@contextlib.contextmanager
def service(
    database: str, runtime_url: str, *, redis: bool = False, tree: Path = PROJECT_DIR, **extra
):
    """Web and worker of ``tree`` on a new database; yields (web URL, key, web pid, env)."""
    with contextlib.ExitStack() as stack:
        if redis:
            extra["REDIS_URL"] = stack.enter_context(redis_server()).url
        env = service_env(
            stack.enter_context(DATABASES[database]()),
            runtime_url=runtime_url,
            var_dir=stack.enter_context(temp_dir()),
            tree=tree,
            AGENT_MODEL=MODEL,
            **extra,
        )
        manage(env, "migrate", "--no-input")
        key = create_api_key(env, name="bench", scopes="model,agent")
        web = stack.enter_context(gunicorn(env, None))
        yield web.url, key, web.pid, env


async def start_chat(session, base: str, key: str, mark: str, *, task: bool = False) -> str:
    """A chat (or, with ``task``, a task job) whose model call carries ``mark``."""
    body = {"source": "bench", "scope_type": "run", "scope_id": mark}
    if task:
        path, body["task"] = "/agent/job/start", f"Say {mark} now."
    else:
        path, body["prompt"] = "/agent/chat", f"Say {mark} now."
    async with session.post(f"{base}{path}", json=body, headers=_auth(key)) as answer:
        return (await answer.json())["data"]["job_id"]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def read_events(session, url: str, key: str, seen) -> None:
    """Reads a stream to its end, calling ``seen(type, data, arrival)`` for each event."""
    async with session.get(url, headers=_auth(key)) as answer:
        assert answer.status == 200, await answer.text()
        kind, data = "", ""
        async for raw in answer.content:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif not line and data:
                seen(kind, json.loads(data), time.time())
                kind, data = "", ""


# --- 1. First token ----------------------------------------------------------------------


async def first_tokens(base: str, key: str, runtime_url: str, jobs: int) -> list[float]:
    import aiohttp

    arrivals: dict[str, float] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(sock_read=300)) as session:
        for n in range(jobs):
            mark = f"mk{n}x"
            job_id = await start_chat(session, base, key, mark, task=True)

            def seen(kind: str, data: dict, at: float, mark: str = mark) -> None:
                if kind == "token":
                    arrivals.setdefault(mark, at)

            await read_events(session, f"{base}/agent/job/{job_id}/events", key, seen)
    sent = chunk_times(runtime_url)
    return [(arrivals[m] - sent[m][0]) * 1000 for m in arrivals if sent.get(m)]


def part_first_token(args) -> list[str]:
    lines = []
    backends = {
        "sqlite": ("SQLite", "sqlite", False),
        "postgres": ("PostgreSQL", "postgres", False),
        "redis": ("PostgreSQL + Redis", "postgres", True),
    }
    for label, database, redis in (backends[name] for name in args.backends.split(",")):
        with (
            runtime() as rt,
            service(database, rt, redis=redis) as (base, key, _, env),
            qcluster(env),
        ):
            delays = asyncio.run(first_tokens(base, key, rt, args.latency_jobs))
        lines.append(
            f"{label:20s} first chunk -> first token event: p50 {statistics.median(delays):6.1f} ms"
            f"  p99 {percentile(sorted(delays), 99):6.1f} ms  ({len(delays)} task jobs, one by one)"
        )
        print(lines[-1], flush=True)
    return lines


# --- 2. Many streams ---------------------------------------------------------------------


def _client(args: tuple) -> list[tuple[str, int, float]]:
    """A client process: its streams (job id, its mark), each read to the end; returns every
    token event as (mark, index of the last word in it, arrival)."""
    base, key, streams, addresses, opened = args
    import aiohttp

    async def run() -> list:
        got: list = []
        sessions = [
            aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, local_addr=(addr, 0)),
                timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
            )
            for addr in addresses
        ]

        async def one(i: int, job_id: str, mark: str) -> None:
            def seen(kind: str, data: dict, at: float) -> None:
                if kind == "status" and data["status"] == "queued":
                    opened.put(1)
                if kind == "token":
                    got.append((mark, releasing_chunk(data["text"], WORDS), at))

            session = sessions[i % len(sessions)]
            await read_events(session, f"{base}/agent/job/{job_id}/events", key, seen)

        await asyncio.gather(*(one(i, job, mark) for i, (job, mark) in enumerate(streams)))
        for session in sessions:
            await session.close()
        return got

    return asyncio.run(run())


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
            total += next(int(x.split()[1]) for x in status if x.startswith("VmRSS:"))
    return total


def part_many_streams(args) -> list[str]:
    import aiohttp

    with (
        runtime(words=40) as rt,
        service("postgres", rt, redis=True, JOB_THREADS=10, GUNICORN_WORKER_CONNECTIONS=3000) as (
            base,
            key,
            web_pid,
            env,
        ),
    ):

        async def queue() -> list[tuple[str, str]]:
            async with aiohttp.ClientSession() as session:
                marks = [f"mk{n}x" for n in range(args.chat_jobs)]
                return [(await start_chat(session, base, key, m), m) for m in marks]

        jobs = asyncio.run(queue())
        workers = [pid for pid in process_tree(web_pid) if pid != web_pid]
        before = rss_kib(workers)
        per = args.streams // args.chat_jobs
        streams = [job for job in jobs for _ in range(per)]
        halves = [streams[0::2], streams[1::2]]
        addresses = [[f"127.0.{k}.{i}" for i in range(10, 26)] for k in (1, 2)]
        with multiprocessing.Manager() as manager:
            opened = manager.Queue()
            with multiprocessing.Pool(2) as pool:
                result = pool.map_async(
                    _client,
                    [(base, key, h, a, opened) for h, a in zip(halves, addresses, strict=True)],
                )
                for _ in range(len(streams)):
                    opened.get(timeout=120)
                held = rss_kib(workers)
                with qcluster(env):
                    calls = asyncio.run(instant_calls(base, key, result))
                    got = [event for part in result.get(timeout=300) for event in part]
        sent = chunk_times(rt)
    delays = [(at - sent[mark][index]) * 1000 for mark, index, at in got if index is not None]
    per_stream = (held - before) / len(streams)
    lines = [
        f"{len(streams)} open streams on {args.chat_jobs} chat jobs (PostgreSQL + Redis): "
        f"web memory {before / 1024:.0f} MiB -> {held / 1024:.0f} MiB, "
        f"{per_stream:.1f} KiB per stream",
        f"token event delivery (runtime chunk -> client), {len(delays)} deliveries: "
        f"p50 {statistics.median(delays):.1f} ms  p99 {percentile(sorted(delays), 99):.1f} ms",
        f"instant /api.php meanwhile: p50 {statistics.median(calls):.1f} ms  "
        f"p99 {percentile(sorted(calls), 99):.1f} ms ({len(calls)} calls, one at a time)",
    ]
    print("\n".join(lines), flush=True)
    return lines


async def instant_calls(base: str, key: str, streams_done) -> list[float]:
    """Instant /api.php calls, one at a time, until the streams ended."""
    import aiohttp

    times = []
    body = {"api_key": key, "model": INSTANT, "prompt": "ping"}
    async with aiohttp.ClientSession() as session:
        while not streams_done.ready():
            started = time.perf_counter()
            async with session.post(f"{base}/api.php", json=body) as answer:
                assert answer.status == 200, await answer.text()
                await answer.read()
            times.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.02)
    return times


# --- 3. Chat job throughput beside the commit before -------------------------------------


def jobs_per_second(base: str, key: str, env: dict[str, str], jobs: int, round_: int) -> float:
    """``jobs`` chats queued, then a cluster started on them: jobs per second from the first
    start to the last end (the server's own timestamps)."""
    import aiohttp

    async def queue() -> list[str]:
        async with aiohttp.ClientSession() as session:
            return [
                await start_chat(session, base, key, f"mk{round_}{n:04d}x") for n in range(jobs)
            ]

    async def ended(job_ids: list[str]) -> list[dict]:
        async with aiohttp.ClientSession() as session:
            while True:
                views = []
                for job_id in job_ids:
                    async with session.get(f"{base}/agent/job/{job_id}", headers=_auth(key)) as a:
                        views.append((await a.json())["data"])
                if all(view["status"] in TERMINAL for view in views):
                    return views
                await asyncio.sleep(0.5)

    job_ids = asyncio.run(queue())
    with qcluster(env):
        views = asyncio.run(ended(job_ids))
    assert all(view["status"] == "finished" for view in views), views[:3]
    from datetime import datetime

    first = min(datetime.fromisoformat(v["started_at"]) for v in views)
    last = max(datetime.fromisoformat(v["finished_at"]) for v in views)
    return jobs / (last - first).total_seconds()


def part_throughput(args) -> list[str]:
    with contextlib.ExitStack() as stack:
        trees = {}
        for rev in args.base.split(","):
            base, worktree = stack.enter_context(checkout(rev))
            trees[f"before ({base})"] = worktree
        trees["after (this tree)"] = PROJECT_DIR
        rt = stack.enter_context(runtime(words=20, first_delay=0, chunk_delay=0))
        services = {
            label: stack.enter_context(service("postgres", rt, tree=tree))
            for label, tree in trees.items()
        }
        rates: dict[str, list[float]] = {label: [] for label in services}
        for round_ in range(args.rounds):
            for label, (url, key, _, env) in services.items():
                rates[label].append(jobs_per_second(url, key, env, args.throughput_jobs, round_))
    lines = [
        f"{label:20s} chat jobs/s (PostgreSQL, 2 workers, a 20-sentence streamed reply): "
        f"median {statistics.median(r):.2f}  rounds {', '.join(f'{x:.2f}' for x in r)}"
        for label, r in rates.items()
    ]
    *befores, after = rates
    for label in befores:
        ratio = statistics.median(rates[after]) / statistics.median(rates[label])
        lines.append(f"after / {label}: {ratio:.2f}")
    print("\n".join(lines), flush=True)
    return lines


# --- 4. Cancel ---------------------------------------------------------------------------


async def cancel_delay(session, base: str, key: str, mark: str) -> float:
    """A chat cancelled once its stream showed two tokens: the ms from the cancel's request
    to the stream's ``cancelled`` event (the stream then ends)."""
    job_id = await start_chat(session, base, key, mark)
    state: dict[str, float] = {}
    tokens: list[float] = []
    cancels: list[asyncio.Future] = []

    async def cancel() -> None:
        state["asked"] = time.time()
        async with session.post(f"{base}/agent/job/{job_id}/cancel", headers=_auth(key)) as a:
            assert a.status == 200, await a.text()

    def seen(kind: str, data: dict, at: float) -> None:
        if kind == "token":
            tokens.append(at)
            if len(tokens) == 2:
                cancels.append(asyncio.ensure_future(cancel()))
        elif kind == "status" and data["status"] == "cancelled":
            state["ended"] = at

    await read_events(session, f"{base}/agent/job/{job_id}/events", key, seen)
    await asyncio.gather(*cancels)
    assert "ended" in state, f"{job_id} was not cancelled"
    return (state["ended"] - state["asked"]) * 1000


async def cancel_delays(base: str, key: str, jobs: int) -> list[float]:
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(sock_read=60)) as session:
        return [await cancel_delay(session, base, key, f"cancel{n}x") for n in range(jobs)]


def part_cancel(args) -> list[str]:
    with (
        runtime(words=400, first_delay=0, chunk_delay=0.05) as rt,
        service("postgres", rt) as (base, key, _, env),
        qcluster(env),
    ):
        delays = sorted(asyncio.run(cancel_delays(base, key, args.cancel_jobs)))
    line = (
        f"cancel -> cancelled event (PostgreSQL, {len(delays)} chats streaming): p50 "
        f"{statistics.median(delays):.0f} ms, max {delays[-1]:.0f} ms"
    )
    print(line, flush=True)
    return [line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-jobs", type=int, default=40)
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--chat-jobs", type=int, default=20)
    parser.add_argument(
        "--base", default="", help="the commits before, comma-separated (part 3; none: skipped)"
    )
    parser.add_argument("--throughput-jobs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cancel-jobs", type=int, default=10)
    parser.add_argument("--parts", default="1,2,3,4")
    parser.add_argument("--backends", default="sqlite,postgres,redis", help="of part 1")
    args = parser.parse_args(argv)
    print(f"bench/events.py: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    parts = args.parts.split(",")
    if "1" in parts:
        part_first_token(args)
    if "2" in parts:
        part_many_streams(args)
    if "3" in parts and args.base:
        part_throughput(args)
    if "4" in parts:
        part_cancel(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
