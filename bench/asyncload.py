"""A closed-loop HTTP load on asyncio: hundreds of keep-alive clients in one process.

Each client sends a request, waits for the whole answer, and sends the next one, until the
time is up; the requests still in flight then finish (up to the timeout). Meanwhile a probe
sends another request on its own connection every ``probe_interval`` seconds: how long an
instant call takes while the service holds the load. HTTP/1.1 only, what the benchmarks
need of it (``Content-Length`` or chunked answers). Loopback only.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bench.common import percentile


class Connection:
    """One keep-alive connection; reconnects after an error."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\n{extra}"
        )
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, payload: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"{self.head}Content-Length: {len(payload)}\r\n\r\n".encode()
        self.writer.write(head + payload)
        status = int((await self.reader.readline()).split()[1])
        length, chunked, close = 0, False, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value
            elif name == b"connection":
                close = value == b"close"
        body = await (self._chunks() if chunked else self.reader.readexactly(length))
        if close:
            self.close()
        return status, body

    async def _chunks(self) -> bytes:
        assert self.reader is not None
        parts = []
        while size := int((await self.reader.readline()).split(b";")[0], 16):
            parts.append(await self.reader.readexactly(size))
            await self.reader.readline()
        await self.reader.readline()
        return b"".join(parts)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass
class Load:
    """What one load run measured (seconds)."""

    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    probes: list[float] = field(default_factory=list)
    probe_errors: int = 0
    first_error: str = ""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def p(self, q: float) -> float:
        return percentile(sorted(self.latencies), q)

    def probe_p50(self) -> float:
        return percentile(sorted(self.probes), 50)


async def _request(conn: Connection, payload: bytes, timeout: float) -> tuple[bool, str]:
    try:
        status, body = await asyncio.wait_for(conn.post(payload), timeout)
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, TimeoutError) as exc:
        conn.close()
        return False, f"{type(exc).__name__}: {exc}"
    if status >= 400:
        return False, f"HTTP {status}: {body[:200]!r}"
    return True, ""


@dataclass(frozen=True)
class Spec:
    """A closed-loop load: ``clients`` clients POSTing ``body`` to ``url`` for ``seconds``
    and, with ``probe_body``, an instant call every ``probe_interval`` seconds on a
    connection of its own. :func:`run` and ``bench.wrkload.run`` both take it."""

    url: str
    body: dict
    clients: int
    seconds: float
    timeout: float = 120.0
    headers: dict[str, str] | None = None
    probe_body: dict | None = None
    probe_interval: float = 0.1


async def run(spec: Spec) -> Load:
    """The load of ``spec``, from asyncio clients in this process."""
    url, headers, timeout = spec.url, spec.headers, spec.timeout
    payload = json.dumps(spec.body).encode()
    load = Load()
    started = time.perf_counter()
    deadline = started + spec.seconds
    finished = started

    async def client() -> None:
        nonlocal finished
        conn = Connection(url, headers)
        try:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                ok, error = await _request(conn, payload, timeout)
                finished = max(finished, time.perf_counter())
                load.requests += 1
                if ok:
                    load.latencies.append(finished - began)
                else:
                    load.errors += 1
                    load.first_error = load.first_error or error
        finally:
            conn.close()

    async def probe() -> None:
        conn = Connection(url, headers)
        payload = json.dumps(spec.probe_body).encode()
        try:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                ok, _ = await _request(conn, payload, timeout)
                if ok:
                    load.probes.append(time.perf_counter() - began)
                else:
                    load.probe_errors += 1
                await asyncio.sleep(spec.probe_interval)
        finally:
            conn.close()

    tasks = [asyncio.create_task(client()) for _ in range(spec.clients)]
    if spec.probe_body is not None:
        tasks.append(asyncio.create_task(probe()))
    await asyncio.gather(*tasks)
    load.seconds = finished - started
    return load


async def post_many(
    url: str, bodies: list[dict], *, connections: int, headers: dict[str, str] | None = None
) -> list[tuple[int, dict]]:
    """POSTs every body once, over ``connections`` connections; the answers in order."""
    answers: list[tuple[int, dict]] = [(0, {})] * len(bodies)
    todo = iter(enumerate(bodies))

    async def worker() -> None:
        conn = Connection(url, headers)
        try:
            for index, body in todo:
                status, raw = await conn.post(json.dumps(body).encode())
                answers[index] = (status, json.loads(raw))
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return answers
