"""The service as real processes on the suite's database: ``qcluster``, gunicorn, Redis.

The test process starts them on the database it uses itself (a file on SQLite, the test
database on PostgreSQL), drives them over real sockets and reads the rows they wrote. Each
runs in its own process group with its output in a log file, and is stopped, or killed, by
the fixture that started it (``tests/conftest.py``).
"""

import atexit
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

PROJECT = Path(__file__).resolve().parent.parent
#: Fixed ports of this suite's own servers (a range no other service of the machine uses).
OWN_PORTS = range(19500, 19600)
#: The metrics files of the processes a session starts (core.metrics): a directory of the
#: session's own, so that the checkout's var/metrics does not gather every test's processes.
SESSION_METRICS_DIR = tempfile.mkdtemp(prefix="llmgw-test-metrics-")
atexit.register(shutil.rmtree, SESSION_METRICS_DIR, ignore_errors=True)


def database_url() -> str:
    """The URL of the database this test process uses (the test database)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


SERVICE_APPLICATION_NAME = "llmgw-test-service"


def service_env(runtime_url: str, **extra: str) -> dict[str, str]:
    """The environment of a service process on the test database and a loopback runtime."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": settings.SECRET_KEY,
        "MODEL_RUNTIME_URL": runtime_url,
        "MODEL_RUNTIME_API": "ollama",
        "RUNTIME_READ_TIMEOUT": "10",
        "Q_WORKERS": "1",
        "Q_POLL": "0.05",
        "Q_SYNC": "false",
        "REDIS_URL": "",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "PROMETHEUS_MULTIPROC_DIR": SESSION_METRICS_DIR,
        # libpq's name for the sessions of the service processes a test starts, so that the
        # wait for them to end counts theirs and not this process's own pooled connections.
        "PGAPPNAME": SERVICE_APPLICATION_NAME,
        **extra,
    }


class Process:
    """A command in its own process group, with its output in a log file."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                cwd=PROJECT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        """SIGKILL to the process and its children at once: a crash, not a shutdown."""
        self.signal_group(signal.SIGCONT)  # a stopped process group is killed all the same
        self.signal_group(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM to the main process alone (a qcluster whose workers get it too hangs),
        then SIGKILL to whatever is left of the group."""
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=15)
        self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


class Cluster(Process):
    """``manage.py qcluster``."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        super().__init__([sys.executable, "manage.py", "qcluster"], env, log)


class WebServer(Process):
    """The production server (``deploy/gunicorn.conf.py``) on a free loopback port."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py"]
        super().__init__(command, {**env, "PORT": str(self.port)}, log)
        deadline = time.monotonic() + 30
        while request(self.url, "GET", "/healthz")[0] != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                output = self.output()
                self.kill()  # no fixture will: it never got the server
                raise RuntimeError(f"the web server did not start:\n{output}")
            time.sleep(0.1)


class RedisServer(Process):
    """A redis-server of the test's own, without persistence, on a port of OWN_PORTS."""

    def __init__(self, log: Path) -> None:
        self.port = next(p for p in OWN_PORTS if _port_is_free(p))
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = log
        self.start()

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        super().__init__(command, dict(os.environ), self._log)
        deadline = time.monotonic() + 10
        while _port_is_free(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start:\n{self.output()}")
            time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def request(
    base_url: str, method: str, path: str, body: Any = None, *, key: str = "", timeout: float = 30
) -> tuple[int, Any]:
    """One HTTP request; returns the status and the decoded JSON answer (None if it is not
    JSON). A connection error is status 0."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        conn.request(method, path, None if body is None else json.dumps(body), headers)
        response = conn.getresponse()
        raw = response.read()
    except OSError:
        return 0, None
    finally:
        conn.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw.decode(errors="replace")


def wait_for_other_sessions_to_end(timeout: float = 10) -> None:
    """On PostgreSQL, waits until the killed service processes' sessions are gone from the
    server, so that the test's teardown (a flush, the database's drop) does not wait on them.
    This process's own connections (its pool's) stay: only sessions named as in
    ``service_env`` are counted."""
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [SERVICE_APPLICATION_NAME],
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


def bus_state() -> tuple[int, int, int]:
    """Of the event bus of the ASGI server running in this process (the ``asgi_server``
    fixture): its streams' watches, its own tasks, and every task of its event loop."""
    import asyncio

    from agents import eventbus

    loop, hub = next(iter(eventbus._hubs.items()))

    async def count() -> int:
        return len(asyncio.all_tasks())

    tasks = asyncio.run_coroutine_threadsafe(count(), loop).result(timeout=10)
    return sum(len(w) for w in hub.watches.values()), len(hub.tasks), tasks
