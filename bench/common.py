"""Shared pieces of the benchmarks: throwaway databases, the service under gunicorn, a
loopback model runtime, a load generator and the figures.

Everything listens on and talks to loopback only, and every run is bounded in requests and
in time. A benchmark puts them together, for example::

    with runtime_process() as runtime, sqlite_database() as db_url:
        env = service_env(db_url, runtime_url=runtime.url)
        manage(env, "migrate")
        key = create_api_key(env, name="bench")
        body = {"api_key": key, "model": "bench-model", "prompt": "hi"}
        with gunicorn(env) as server:
            result = run_load(f"{server.url}/api.php", body, concurrency=16, requests=5000,
                              seconds=10)
            print(result.rps, result.p50_ms)

The service's settings come from the environment exactly as in production (DEBUG=0).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import math
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

PROJECT_DIR = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def python() -> str:
    """The project's interpreter (the venv's when it exists)."""
    venv = PROJECT_DIR / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def wait_until_answering(url: str, *, timeout: float = 30.0, process=None) -> None:
    """Polls ``GET url`` until it answers 200; raises if ``process`` dies or time runs out."""
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with status {process.returncode}")
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
        try:
            conn.request("GET", parts.path or "/")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def _stop(process: subprocess.Popen, *, timeout: float = 15.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- Databases --------------------------------------------------------------------------


@contextlib.contextmanager
def temp_dir(prefix: str = "llmgw-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def checkout(revision: str) -> Iterator[tuple[str, Path]]:
    """``revision``'s short hash and a temporary git worktree of it, removed at the end: the
    "before" side of a side-by-side benchmark."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", revision],
        cwd=PROJECT_DIR, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    with temp_dir("llmgw-bench-base-") as parent:
        tree = parent / "base"
        subprocess.run(
            ["git", "worktree", "add", "--quiet", "--detach", str(tree), short],
            cwd=PROJECT_DIR, check=True,
        )  # fmt: skip
        try:
            yield short, tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=PROJECT_DIR, check=False
            )


@contextlib.contextmanager
def sqlite_database() -> Iterator[str]:
    """The URL of a fresh SQLite file, deleted afterwards."""
    with temp_dir("llmgw-bench-sqlite-") as path:
        yield f"sqlite:///{path / 'db.sqlite3'}"


@contextlib.contextmanager
def postgres_database(admin_url: str = PG_ADMIN_URL) -> Iterator[str]:
    """The URL of a throwaway PostgreSQL database, created now and dropped afterwards."""
    import psycopg

    name = f"llmgw_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(admin_url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: The databases a benchmark can run on, by name (``--databases sqlite,postgres``).
DATABASES = {"sqlite": sqlite_database, "postgres": postgres_database}
#: The model the loopback runtime serves.
MODEL = "bench-model"


# --- The service ------------------------------------------------------------------------


def service_env(
    database_url: str,
    *,
    runtime_url: str,
    var_dir: Path | None = None,
    tree: Path = PROJECT_DIR,
    **extra: object,
) -> dict[str, str]:
    """The environment of one service instance, as production would set it (DEBUG=0).

    ``tree`` is the checkout it runs from (its PYTHONPATH; ``manage`` and ``gunicorn`` run
    there): this one, or another commit's worktree (bench/compare.py)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONPATH": str(tree),
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(48),
        "ALLOWED_HOSTS": f"{LOOPBACK},localhost",
        "DATABASE_URL": database_url,
        "MODEL_RUNTIME_URL": runtime_url,
        "MODEL_RUNTIME_API": "ollama",
        "LOG_LEVEL": "WARNING",
    }
    if var_dir is not None:
        env["VAR_DIR"] = str(var_dir)
    env.update({name: str(value) for name, value in extra.items()})
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """Runs ``manage.py <args>`` with ``env``; returns its standard output."""
    result = subprocess.run(
        [python(), "manage.py", *args],
        cwd=env["PYTHONPATH"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def create_api_key(
    env: dict[str, str], *, name: str, rate_limit: int = 0, scopes: str = "model"
) -> str:
    """A new key made by the service's own command (the plain key is its last line), with
    no agent API limits (through the defaults' settings: an earlier commit ignores them)."""
    unlimited = {
        "DEFAULT_KEY_AGENT_STARTS_PER_MINUTE": "0",
        "DEFAULT_KEY_AGENT_READS_PER_MINUTE": "0",
        "DEFAULT_KEY_MAX_ACTIVE_JOBS": "0",
    }
    out = manage(
        {**env, **unlimited},
        *("create_api_key", "--name", name, "--scopes", scopes, "--rate-limit", str(rate_limit)),
    )
    return out.strip().splitlines()[-1]


@dataclass(frozen=True)
class ServerConfig:
    """How gunicorn runs the service: ``config.wsgi`` in ``gthread`` or ``sync`` workers,
    or ``config.asgi`` in uvicorn workers (``uvicorn``, as deploy/gunicorn.conf.py does)."""

    workers: int = 2
    threads: int = 8
    worker_class: str = "gthread"

    def __str__(self) -> str:
        threads = f"x{self.threads}" if self.worker_class == "gthread" else ""
        return f"{self.worker_class} {self.workers}{threads}"

    def args(self) -> list[str]:
        if self.worker_class == "uvicorn":
            return [
                "config.asgi:application",
                "--workers",
                str(self.workers),
                "--worker-class",
                "config.gunicorn_worker.Worker",
            ]
        args = ["config.wsgi", "--workers", str(self.workers), "--worker-class", self.worker_class]
        if self.worker_class == "gthread":
            args += ["--threads", str(self.threads)]
        return args


@dataclass(frozen=True)
class Server:
    url: str
    pid: int
    output: Path | None = None  # what gunicorn's service printed (errors, the app's log)


@contextlib.contextmanager
def gunicorn(env: dict[str, str], config: ServerConfig | None = ServerConfig()) -> Iterator[Server]:
    """The server on a free loopback port, answering; yields its URL and pid. With
    ``config=None``, the production server of the tree (its deploy/gunicorn.conf.py)."""
    port = free_port()
    with temp_dir("llmgw-bench-gunicorn-") as logs, open(logs / "output.log", "wb") as output:
        log = logs / "gunicorn.log"
        server = ["-c", "deploy/gunicorn.conf.py"] if config is None else config.args()
        process = subprocess.Popen(
            [
                python(),
                "-m",
                "gunicorn",
                "--bind",
                f"{LOOPBACK}:{port}",
                *server,
                "--error-logfile",
                str(log),
                "--log-level",
                "warning",
                "--keep-alive",
                "30",
            ],
            cwd=env["PYTHONPATH"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        base_url = f"http://{LOOPBACK}:{port}"
        try:
            wait_until_answering(f"{base_url}/healthz", process=process)
            yield Server(base_url, process.pid, Path(output.name))
        except BaseException:
            if log.exists():
                sys.stderr.write(log.read_text()[-4000:])
            raise
        finally:
            _stop(process)


# --- A loopback model runtime -----------------------------------------------------------

_RUNTIME_SERVER = """
import sys, threading
from tests.runtime_server import RuntimeServer
server = RuntimeServer(port=int(sys.argv[1]), models=tuple(sys.argv[2:])).start()
threading.Event().wait()
"""

RUNTIMES = {
    "fast": "bench.common fast Ollama stub (asyncio, own process)",
    "tests": "tests/runtime_server.RuntimeServer (threads, own process)",
}


@contextlib.contextmanager
def runtime_process(models: Sequence[str] = (MODEL,), kind: str = "fast") -> Iterator[Server]:
    """A model runtime on loopback in its own process (so that it competes with neither the
    client nor the service for a GIL) that answers at once; yields its base URL.

    ``kind="tests"`` is tests/runtime_server.RuntimeServer, the suite's full fake (Ollama and
    OpenAI protocols, threads); ``kind="fast"`` is :func:`serve_fast_runtime`, which speaks
    only what ``/api.php`` needs of Ollama with a fraction of the CPU per call, leaving the
    two cores to the service under test.
    """
    port = free_port()
    if kind == "tests":
        command = [python(), "-c", _RUNTIME_SERVER, str(port), *models]
    else:
        command = [python(), "-m", "bench.common", "fast-runtime", str(port), *models]
    with _runtime_server(command, port) as server:
        yield server


@contextlib.contextmanager
def _runtime_server(command: list[str], port: int) -> Iterator[Server]:
    """Runs ``command``, a runtime that listens on ``port``, until it answers; stops it after."""
    process = subprocess.Popen(
        command,
        cwd=PROJECT_DIR,
        env={**os.environ, "PYTHONPATH": str(PROJECT_DIR)},
        stdout=subprocess.DEVNULL,
    )
    url = f"http://{LOOPBACK}:{port}"
    try:
        wait_until_answering(f"{url}/api/tags", process=process)
        yield Server(url, process.pid)
    finally:
        _stop(process)


_SLOW_RUNTIME = """
import sys, threading
from tests.runtime_server import Reply, RuntimeServer
port, hold, model, marker = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
server = RuntimeServer(port=port, models=(model,)).start()
server.script = lambda prompt, body: Reply(text="Done.", delay=hold if marker in prompt else 0)
threading.Event().wait()
"""


@contextlib.contextmanager
def slow_runtime(seconds: float, *, marker: str = "") -> Iterator[Server]:
    """tests/runtime_server.RuntimeServer in its own process, holding each generate call whose
    prompt contains ``marker`` (every call if empty) ``seconds`` before it answers."""
    port = free_port()
    command = [python(), "-c", _SLOW_RUNTIME, str(port), str(seconds), MODEL, marker]
    with _runtime_server(command, port) as server:
        yield server


class RedisServer:
    """A redis-server of the benchmark's own, without persistence, on a free port of
    19500-19599 (the shared Redis of the machine is never touched); ``kill()`` and
    ``start()`` again restart it empty."""

    def __init__(self) -> None:
        self.port = next(p for p in range(19500, 19600) if not self._answering(p))
        self.url = f"redis://{LOOPBACK}:{self.port}/0"
        self.process: subprocess.Popen | None = None

    @staticmethod
    def _answering(port: int) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex((LOOPBACK, port)) == 0

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", LOOPBACK]
        command += ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self._answering(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.kill()


class _FastRuntime(asyncio.Protocol):
    """HTTP/1.1 keep-alive, Ollama's ``POST /api/generate`` and ``POST /api/chat`` (whole, or
    streamed as NDJSON) and ``GET /api/tags``; the answer is ``"echo: " + prompt`` (the last
    message's content in a chat), like RuntimeServer's default.

    ``holds`` maps a model to the seconds each of its calls is held before the answer (a
    model that takes that long; 0 answers at once), on the event loop: holding a thousand
    calls costs nothing.
    """

    def __init__(self, holds: dict[str, float]) -> None:
        self.holds = holds
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            method, path = head[0].split(" ")[:2]
            hold, answer = self.handle(method, path, body)
            if hold > 0:
                asyncio.get_running_loop().call_later(hold, self.answer, *answer)
            else:
                self.answer(*answer)

    def handle(self, method: str, path: str, body: bytes) -> tuple[float, tuple[int, bytes, str]]:
        if method == "GET" and path == "/api/tags":
            return 0, _json(200, {"models": [{"name": n, "model": n} for n in self.holds]})
        if method != "POST" or path not in ("/api/generate", "/api/chat"):
            return 0, _json(404, {"error": "not found"})
        chat = path == "/api/chat"
        try:
            request = json.loads(body)
            model = request["model"]
            prompt = request["messages"][-1]["content"] if chat else request["prompt"]
        except (ValueError, KeyError, TypeError, IndexError):
            return 0, _json(400, {"error": "invalid request"})
        if model not in self.holds:
            return 0, _json(404, {"error": f"model '{model}' not found"})
        text = f"echo: {prompt}"

        def said(piece: str) -> dict:
            if chat:
                return {"message": {"role": "assistant", "content": piece}}
            return {"response": piece}

        final = {
            "model": model,
            "created_at": "2025-01-01T00:00:00Z",
            **said(text),
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": len(prompt.split()),
            "eval_count": len(text.split()),
        }
        if not request.get("stream", True):
            return self.holds[model], _json(200, final)
        piece = {"model": model, **said(text), "done": False}
        lines = json.dumps(piece) + "\n" + json.dumps({**final, **said("")}) + "\n"
        return self.holds[model], (200, lines.encode(), "application/x-ndjson")

    def answer(self, status: int, payload: bytes, content_type: str) -> None:
        assert self.transport is not None
        if self.transport.is_closing():
            return  # the client went away while the call was held
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        self.transport.write(head.encode() + payload)


def _json(status: int, data: dict) -> tuple[int, bytes, str]:
    return status, json.dumps(data).encode(), "application/json"


def serve_fast_runtime(port: int, models: Sequence[str]) -> None:
    """Serves :class:`_FastRuntime` on loopback until the process is stopped. A model may be
    given as ``name=SECONDS``: each of its calls is held that long."""
    holds = {}
    for spec in models:
        name, _, seconds = spec.partition("=")
        holds[name] = float(seconds or 0)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _FastRuntime(holds), LOOPBACK, port, backlog=1024)
        async with server:
            await server.serve_forever()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(serve())


# --- CPU accounting (Linux /proc) ---------------------------------------------------------


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree(root: int) -> list[int]:
    """``root`` and its live descendants (empty where /proc is not available)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and (fields := _proc_stat(int(entry))):
            children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def postgres_backends(database: str) -> list[int]:
    """The server processes serving connections to ``database``."""
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                words = cmdline.read().replace(b"\0", b" ").decode(errors="replace").split()
        except OSError:
            continue
        # "postgres: [cluster: ]user database host(port) state"
        if words and words[0] == "postgres:" and database in words:
            pids.append(int(entry))
    return pids


def cpu_seconds(pids: Sequence[int]) -> dict[int, float]:
    """User plus system CPU seconds used so far by each of ``pids`` that is alive."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for pid in pids:
        if fields := _proc_stat(pid):
            used[pid] = (int(fields[11]) + int(fields[12])) / tick
    return used


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle (every core, every process: the
    database, the runtime and the load generator too), from ``/proc/stat``."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


# --- Load -------------------------------------------------------------------------------


@dataclass
class LoadResult:
    """What a load run measured. Latencies are in milliseconds."""

    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float
    tool: str
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of sorted ``values``, nearest-rank."""
    if not values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(values)))
    return values[min(rank, len(values)) - 1]


def check_answer(url: str, body: dict) -> dict:
    """One request, which must answer 200 with a JSON body (raises otherwise)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("POST", parts.path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"POST {url} answered {response.status}: {data[:500]!r}")
    return json.loads(data)


def wrk_path() -> str | None:
    return None if os.environ.get("BENCH_NO_WRK") else shutil.which("wrk")


def run_load(
    url: str,
    body: dict,
    *,
    concurrency: int,
    requests: int,
    seconds: float,
    threads: int | None = None,
) -> LoadResult:
    """POSTs ``body`` to ``url`` over ``concurrency`` keep-alive connections until
    ``requests`` answers or ``seconds`` have passed, whichever comes first.

    Uses wrk (C, with a Lua script for the body and the request cap) when it is installed,
    else keep-alive ``http.client`` connections spread over processes.
    """
    wrk = wrk_path()
    if wrk:
        return _wrk_load(wrk, url, body, concurrency, requests, seconds, threads)
    return _python_load(url, body, concurrency, requests, seconds)


_WRK_SCRIPT = """
-- Elapsed time from the first request to the last answer, on the monotonic clock (wrk's
-- own duration is always the whole -d, even when every thread stopped early).
local ok, ffi = pcall(require, "ffi")
local now_us = function() return 0 end
if ok then
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clk_id, bench_timespec *tp);
  ]]
  local ts = ffi.new("bench_timespec")
  now_us = function()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
  end
end

wrk.method = "POST"
wrk.body = [==[%(body)s]==]
wrk.headers["Content-Type"] = "application/json"
local limit = %(limit)d
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  count = 0
  first_us = now_us()
  last_us = first_us
end

function response(status, headers, body)
  count = count + 1
  last_us = now_us()
  if count == limit then
    io.write("STOPPED\\n")
    io.flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local first, last = nil, nil
  for _, t in ipairs(threads) do
    local f, l = t:get("first_us"), t:get("last_us")
    if first == nil or f < first then first = f end
    if last == nil or l > last then last = l end
  end
  local e = summary.errors
  io.write(string.format("BENCH %%d %%d %%d %%d %%d %%d\\n", summary.requests,
    summary.duration, last - first, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def _wrk_load(
    wrk: str,
    url: str,
    body: dict,
    concurrency: int,
    requests: int,
    seconds: float,
    threads: int | None,
) -> LoadResult:
    threads = max(1, min(threads or os.cpu_count() or 1, concurrency))
    script = _WRK_SCRIPT % {"body": json.dumps(body), "limit": math.ceil(requests / threads)}
    with temp_dir("llmgw-bench-wrk-") as path:
        (path / "post.lua").write_text(script)
        process = subprocess.Popen(
            [
                wrk,
                f"-t{threads}",
                f"-c{concurrency}",
                f"-d{max(1, math.ceil(seconds))}s",
                "--timeout",
                "10s",
                "-s",
                str(path / "post.lua"),
                url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines, stopped = [], 0
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            stopped += line.startswith("STOPPED")
            if stopped == threads:
                # Every thread reached its share; wrk would still sleep until -d is over.
                process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
        stderr = process.stderr.read() if process.stderr else ""
    line = next((ln for ln in lines if ln.startswith("BENCH ")), None)
    if process.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed:\n{''.join(lines)}\n{stderr}")
    done, duration_us, elapsed_us, errors, p50_us, p99_us = (int(v) for v in line.split()[1:])
    return LoadResult(
        requests=done,
        seconds=(elapsed_us or duration_us) / 1e6,
        errors=errors,
        p50_ms=p50_us / 1000,
        p99_ms=p99_us / 1000,
        tool="wrk",
    )


def _python_connection_loop(
    url: str, payload: bytes, count: int, deadline: float
) -> tuple[list[float], int]:
    """One keep-alive connection sending ``payload`` ``count`` times (or until ``deadline``)."""
    parts = urlsplit(url)
    headers = {"Content-Type": "application/json", "Content-Length": str(len(payload))}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    latencies: list[float] = []
    errors = 0
    try:
        for _ in range(count):
            if time.perf_counter() >= deadline:
                break
            started = time.perf_counter()
            try:
                conn.request("POST", parts.path, payload, headers)
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                errors += 1
                conn.close()
                continue
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status >= 400:
                errors += 1
    finally:
        conn.close()
    return latencies, errors


def _python_process(args: tuple[str, bytes, list[int], float]) -> tuple[list[float], int]:
    url, payload, counts, seconds = args
    deadline = time.perf_counter() + seconds
    results: list[tuple[list[float], int]] = [([], 0)] * len(counts)

    def run(index: int, count: int) -> None:
        results[index] = _python_connection_loop(url, payload, count, deadline)

    workers = [threading.Thread(target=run, args=item) for item in enumerate(counts)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [ms for lat, _ in results for ms in lat], sum(err for _, err in results)


def _python_load(
    url: str, body: dict, concurrency: int, requests: int, seconds: float
) -> LoadResult:
    payload = json.dumps(body).encode()
    counts = [requests // concurrency + (i < requests % concurrency) for i in range(concurrency)]
    processes = min(concurrency, os.cpu_count() or 1, 4)
    shares = [counts[i::processes] for i in range(processes)]
    started = time.perf_counter()
    if processes == 1:
        outcomes = [_python_process((url, payload, shares[0], seconds))]
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            outcomes = pool.map(_python_process, [(url, payload, s, seconds) for s in shares])
    elapsed = time.perf_counter() - started
    latencies = sorted(ms for lat, _ in outcomes for ms in lat)
    return LoadResult(
        requests=len(latencies),
        seconds=elapsed,
        errors=sum(err for _, err in outcomes),
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        tool="python http.client",
        latencies_ms=latencies,
    )


# --- Figures ----------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain text table, numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(
            value.rjust(width) if index else value.ljust(width)
            for index, (value, width) in enumerate(zip(row, widths, strict=True))
        )

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


if __name__ == "__main__" and sys.argv[1:2] == ["fast-runtime"]:
    serve_fast_runtime(int(sys.argv[2]), sys.argv[3:])


@contextlib.contextmanager
def qcluster(env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """``manage.py qcluster`` in its own process group; stopped with SIGTERM to the cluster
    alone (as a supervisor would), then whatever is left of the group is killed."""
    with temp_dir("llmgw-bench-qcluster-") as logs, (logs / "qcluster.log").open("wb") as log:
        process = subprocess.Popen(
            [python(), "manage.py", "qcluster"],
            cwd=env.get("PYTHONPATH", PROJECT_DIR),  # the checkout the service runs from
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        except BaseException:
            sys.stderr.write((logs / "qcluster.log").read_text(errors="replace")[-4000:])
            raise
        finally:
            if process.poll() is None:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# Has PostgreSQL drop every connection to the current database but the asking one.
TERMINATE_EVERY_CONNECTION = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


# --- A client of the agent API, and a fixture process beside the service ---------------------


class AgentClient:
    """The agent API on one keep-alive connection."""

    def __init__(self, base_url: str, key: str) -> None:
        host, port = base_url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=300)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[dict, int]:
        """The answer's JSON and its size in bytes; anything but 200 raises."""
        payload = None if body is None else json.dumps(body)
        try:
            self.conn.request(method, path, payload, self.headers)
        except (BrokenPipeError, ConnectionResetError):
            # The service closed the kept-alive connection while the bench was busy (a
            # 10,000-message fill outlasts gunicorn's keepalive): nothing was read; send again.
            self.conn.close()
            self.conn.request(method, path, payload, self.headers)
        response = self.conn.getresponse()
        raw = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path} answered {response.status}: {raw[:300]!r}")
        return json.loads(raw)["data"], len(raw)

    def chat(
        self, scope_id: str, prompt: str, profile: str, *, scope_type: str = "ctx",
        timeout: float = 600,
    ) -> dict:  # fmt: skip
        """Starts a chat and waits for its job to end; the job as GET /agent/job/{id} shows it
        (with its ``job_id``)."""
        body = {"source": "bench", "scope_type": scope_type, "scope_id": scope_id}
        body |= {"prompt": prompt, "profile": profile}
        job_id = self.call("POST", "/agent/chat", body)[0]["job_id"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job, _ = self.call("GET", f"/agent/job/{job_id}")
            if job["status"] == "finished":
                return {"job_id": job_id, **job}
            if job["status"] in ("failed", "cancelled"):
                raise RuntimeError(f"chat job {job_id} {job['status']}: {job.get('error')}")
            time.sleep(0.02)
        raise TimeoutError(f"chat job {job_id} did not end within {timeout:.0f} s")


@contextlib.contextmanager
def agent_service(env: dict[str, str], key: str) -> Iterator[AgentClient]:
    """The production server of ``env``'s tree and a qcluster; yields a client for ``key``."""
    with gunicorn(env, None) as server, qcluster(env):
        yield AgentClient(server.url, key)


def _at_ms(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp() * 1000


def first_context(job: dict) -> tuple[float, dict]:
    """The ms from the first ``context`` step's start to the first model call's start, and
    the output of the last ``context`` step before that call."""
    steps = job["steps"]
    call = next(i for i, step in enumerate(steps) if step["kind"] == "model_call")
    contexts = [step for step in steps[:call] if step["kind"] == "context"]
    return _at_ms(steps[call]["started_at"]) - _at_ms(contexts[0]["started_at"]), contexts[-1][
        "output"
    ]


def before_first_call(job: dict) -> dict[str, float]:
    """Of a chat job's steps before its first model call: ``retrieval``, the ms of its
    ``search_history`` and ``read_history`` tool calls, and ``load``, the ms from the job's
    start to its first ``context`` step (the turn's load and its question's embedding)."""
    steps = job["steps"]
    call = next(i for i, step in enumerate(steps) if step["kind"] == "model_call")
    tools = [s for s in steps[:call] if s["name"] in ("search_history", "read_history")]
    context = next(step for step in steps if step["kind"] == "context")
    return {
        "retrieval": sum((step["elapsed"] or 0.0) * 1000 for step in tools),
        "load": _at_ms(context["started_at"]) - _at_ms(job["started_at"]),
    }


def prompt_text(request) -> str:
    """All the text a generate call sent (a loopback runtime's recorded request, or a
    ``model_call`` step's input): its prompt, or its chat messages."""
    body = (request if isinstance(request, dict) else request.body) or {}
    if "messages" in body:
        return "\n".join(str(message.get("content", "")) for message in body["messages"])
    return str(body.get("prompt", ""))


def first_prompt(runtime, sent: int) -> str:
    """The text of the first generate call a loopback runtime (tests/runtime_server.py)
    received after its ``sent`` first requests."""
    from tests.runtime_server import GENERATE_PATHS

    return prompt_text(next(r for r in runtime.requests[sent:] if r.path in GENERATE_PATHS))


class Fixture:
    """A process of the bench's own (``command``, Django set up on the service's database)
    that prepares what no HTTP endpoint does (filling conversations through the public
    services) and answers requests one JSON line at a time (``fixture_serve``): ``ready``
    is its first answer."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path = PROJECT_DIR) -> None:
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.errors, text=True,
        )  # fmt: skip
        self.ready = self._answer()

    def _answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith("RESULT "):
                return json.loads(line.removeprefix("RESULT "))
        self.errors.seek(0)
        raise RuntimeError(f"the fixture process ended:\n{self.errors.read()[-5000:].decode()}")

    def call(self, operation: str, **arguments: object) -> dict:
        self.process.stdin.write(json.dumps({"op": operation, **arguments}) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def __enter__(self) -> Fixture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stdin.close()
        _stop(self.process)
        self.errors.close()


def fixture_serve(ready: object, operations: dict) -> None:
    """The fixture process's side: ``ready``, then ``operations[op](**arguments)`` for each
    request line, until its standard input ends."""
    print("RESULT " + json.dumps(ready), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print("RESULT " + json.dumps(operations[request.pop("op")](**request)), flush=True)


def result_of(command: list[str], env: dict[str, str], cwd: Path, timeout: float = 3600) -> dict:
    """Runs ``command``; the JSON of its ``RESULT`` line."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"{command[1:3]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return json.loads(line.removeprefix("RESULT "))


def delete_job_messages(job_id: str) -> dict:
    """In a fixture process: deletes a chat job's question and reply, so that they do not
    become history (no service deletes messages)."""
    from conversations.models import Message

    return {"deleted": Message.objects.filter(job_id=job_id).delete()[0]}
