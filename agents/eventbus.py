"""Delivering job events to the open streams of a web process, on its event loop.

One :class:`Hub` per process holds the watches of its open streams (``job:<id>``,
``conversation:<id>``) and one listener (``agents.eventlisteners``) for the announcements
of every writer (``agents.events``): a Redis pub/sub subscription when ``REDIS_URL`` is set,
a PostgreSQL ``LISTEN`` on PostgreSQL. On SQLite, which cannot announce, it reads the
newest event of each watched key every ``EVENTS_POLL_SECONDS`` instead; on the others the
same read runs every few seconds as a safety net, and every watch reads the table again
whenever the listener (re)connects. So an announcement that was lost (Redis or the
database away for a moment) delays events but never loses one: a stream always goes on
from the last event it sent, reading the table when what it was told does not follow on.

A stream holds no thread and no database connection while it waits: its reads run in the
bus's own two threads (:func:`db`), which give their connections back after each one.
The hub's tasks run while some stream watches, and stop a moment after the last one left.
"""

import asyncio
import contextlib
import contextvars
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import Max

from agents import eventlisteners, events
from agents.event_models import JobEvent, JobEventType
from agents.models import TERMINAL, Job
from gateway.dbthread import release_connections

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds between the safety reads when Redis or PostgreSQL announce events.
SAFETY_POLL_SECONDS = 5.0
#: A hub with no watch stops its tasks after this many seconds.
LINGER_SECONDS = 2.0
#: Announcements a watch keeps before it gives up on them and reads the table instead.
PENDING_LIMIT = 1_000
#: Events read from the table at once.
READ_BATCH = 500
#: Pause before a failed read or connection is tried again.
RETRY_SECONDS = 0.5

#: Threads of the bus's reads (``db``), shared by every stream of the process.
DB_THREADS = 2
_executor = ThreadPoolExecutor(max_workers=DB_THREADS, thread_name_prefix="events-db")


async def db(func: Callable[..., T], *args: Any, inline: bool = False) -> T:
    """``func(*args)`` in the bus's threads, its database connection given back after.
    ``inline``: in the request's own thread instead (a server without a lasting event loop,
    whose request runs in one thread: Django's test client sees its test's rows there)."""
    if inline:
        return await sync_to_async(func)(*args)

    def run() -> T:
        try:
            return func(*args)
        finally:
            release_connections()

    return await asyncio.get_running_loop().run_in_executor(_executor, run)


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    data: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.type == JobEventType.STATUS and self.data.get("status") in TERMINAL


class Watch:
    """A stream's interest in one key: what was announced for it since it last looked."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.pending: list[dict[str, Any]] = []
        self.stale = False
        self._woken = asyncio.Event()

    def push(self, payload: dict[str, Any]) -> None:
        if len(self.pending) >= PENDING_LIMIT:
            self.pending.clear()
            self.stale = True
        else:
            self.pending.append(payload)
        self._woken.set()

    def resync(self) -> None:
        """Something may have been missed: the stream reads the table."""
        self.stale = True
        self._woken.set()

    async def wait(self, timeout: float | None) -> bool:
        """True once something new was announced (or may have been missed), False after
        ``timeout`` seconds of nothing."""
        if not self._woken.is_set():
            try:
                async with asyncio.timeout(timeout):
                    await self._woken.wait()
            except TimeoutError:
                return False
        self._woken.clear()
        return True

    def take(self) -> tuple[list[dict[str, Any]], bool]:
        """The announcements since the last look, and whether the table must be read."""
        pending, stale = self.pending, self.stale
        self.pending, self.stale = [], False
        return pending, stale


# --- Versions: what SQLite's poll (and the safety read) compare -----------------------------

_versions: dict[str, Callable[[list[str]], dict[str, int]]] = {}


def register_version(prefix: str, func: Callable[[list[str]], dict[str, int]]) -> None:
    """``func(ids)`` gives, for the ids of keys ``<prefix>:<id>``, a number that grows when
    something new is stored for them; it runs in the bus's threads."""
    _versions[prefix] = func


def _job_versions(ids: list[str]) -> dict[str, int]:
    rows = JobEvent.objects.filter(job_id__in=ids).values("job_id").annotate(last=Max("seq"))
    return {row["job_id"]: row["last"] for row in rows}


register_version("job", _job_versions)


def _read_versions(keys: list[str]) -> dict[str, int]:
    by_prefix: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        prefix, _, ident = key.partition(":")
        by_prefix[prefix].append(ident)
    found: dict[str, int] = {}
    for prefix, ids in by_prefix.items():
        if prefix in _versions:
            for ident, version in _versions[prefix](ids).items():
                found[f"{prefix}:{ident}"] = version
    return found


# --- The hub ------------------------------------------------------------------------------


class Hub:
    """The watches of one process, and the tasks that wake them."""

    def __init__(self) -> None:
        self.watches: dict[str, set[Watch]] = {}
        self.versions: dict[str, int] = {}
        self.tasks: list[asyncio.Task] = []
        self._stop: asyncio.TimerHandle | None = None

    def add(self, watch: Watch) -> None:
        self.watches.setdefault(watch.key, set()).add(watch)
        if self._stop is not None:
            self._stop.cancel()
            self._stop = None
        if not self.tasks:
            self._start()

    def remove(self, watch: Watch) -> None:
        found = self.watches.get(watch.key)
        if found is not None:
            found.discard(watch)
            if not found:
                del self.watches[watch.key]
                self.versions.pop(watch.key, None)
        if not self.watches and self.tasks and self._stop is None:
            self._stop = asyncio.get_running_loop().call_later(LINGER_SECONDS, self._stop_tasks)

    def deliver(self, payload: dict[str, Any]) -> None:
        keys = [payload["key"]] if "key" in payload else [f"job:{payload.get('job')}"]
        if payload.get("conversation"):
            keys.append(f"conversation:{payload['conversation']}")
        for key in keys:
            for watch in self.watches.get(key, ()):
                watch.push(payload)

    def resync_all(self) -> None:
        for watches in self.watches.values():
            for watch in watches:
                watch.resync()

    def _start(self) -> None:
        # Tasks of the process, not of the request that happened to start them.
        loop, fresh = asyncio.get_running_loop(), contextvars.Context()
        self.tasks.append(loop.create_task(self._poll(), context=fresh))
        kind = events.bus_kind()
        if kind in ("redis", "postgresql"):
            listen = eventlisteners.LISTENERS[kind]
            self.tasks.append(loop.create_task(listen(self), context=fresh))

    def _stop_tasks(self) -> None:
        self._stop = None
        if self.watches:
            return
        for task in self.tasks:
            task.cancel()
        self.tasks = []
        self.versions.clear()

    async def _poll(self) -> None:
        interval = (
            settings.EVENTS_POLL_SECONDS if events.bus_kind() == "poll" else SAFETY_POLL_SECONDS
        )
        while True:
            await asyncio.sleep(interval)
            keys = list(self.watches)
            if not keys:
                continue
            try:
                found = await db(_read_versions, keys)
            except Exception as exc:
                logger.warning("Event poll failed (%s); trying again", exc)
                continue
            for key in keys:
                version = found.get(key, 0)
                if self.versions.get(key) != version:
                    self.versions[key] = version
                    for watch in self.watches.get(key, ()):
                        watch.resync()

    def received(self, raw: str | bytes) -> None:
        try:
            payload = json.loads(raw)
        except ValueError:
            return
        if isinstance(payload, dict):
            self.deliver(payload)


_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}


def hub() -> Hub:
    """The hub of the running event loop (the process's, under the ASGI server)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        for old in [old for old in _hubs if old.is_closed()]:
            del _hubs[old]
        found = _hubs[loop] = Hub()
    return found


@contextlib.asynccontextmanager
async def watch(key: str) -> AsyncIterator[Watch]:
    """Watches ``key`` for as long as the block runs."""
    current = hub()
    found = Watch(key)
    current.add(found)
    try:
        yield found
    finally:
        current.remove(found)


@contextlib.asynccontextmanager
async def polling(key: str) -> AsyncIterator[Watch]:
    """A watch that reads the table every ``EVENTS_POLL_SECONDS`` without a hub: for a
    server without a lasting event loop (WSGI, Django's test client)."""

    class Polling(Watch):
        async def wait(self, timeout: float | None) -> bool:
            await asyncio.sleep(settings.EVENTS_POLL_SECONDS)
            self.stale = True
            return True

    yield Polling(key)


# --- A job's events -------------------------------------------------------------------------


def _open(job_id: str, after: int) -> tuple[int, bool, list[Event]]:
    """The job's last event id, whether it is over, and its first events after ``after``."""
    status = Job.objects.filter(pk=job_id).values_list("status", flat=True).first()
    last = JobEvent.objects.filter(job_id=job_id).aggregate(last=Max("seq"))["last"] or 0
    return last, status in TERMINAL, _read(job_id, min(after, last))


def _read(job_id: str, after: int) -> list[Event]:
    rows = JobEvent.objects.filter(job_id=job_id, seq__gt=after).order_by("seq")
    return [Event(*row) for row in rows.values_list("seq", "type", "data")[:READ_BATCH]]


async def _retrying(func: Callable[..., T], *args: Any, inline: bool = False) -> T:
    """``func`` in the bus's threads, tried again while the database is away."""
    while True:
        try:
            return await db(func, *args, inline=inline)
        except Exception as exc:
            logger.warning("Event read failed (%s); trying again", exc)
            await asyncio.sleep(RETRY_SECONDS)


def _announced(payloads: list[dict[str, Any]], job_id: str, last: int) -> list[Event] | None:
    """The announced events of the job that follow on from ``last``; None when they do not
    (a gap, or an event announced without its data): then the table is read."""
    found = sorted(
        (p for p in payloads if p.get("job") == job_id and "key" not in p),
        key=lambda p: p["id"],
    )
    result = []
    for payload in found:
        if payload["id"] <= last:
            continue
        if payload["id"] != last + 1 or "data" not in payload:
            return None
        result.append(Event(payload["id"], payload["type"], payload["data"]))
        last = payload["id"]
    return result


async def job_events(
    job_id: str, *, after: int = 0, keepalive: float | None = None, poll: bool = False
) -> AsyncIterator[Event | None]:
    """The job's events after ``after`` (the first one on, with 0), then live ones as they
    come, ending with the terminal status event; ``None`` after ``keepalive`` seconds with
    none. An ``after`` beyond the last event means live events only. ``poll``: no lasting
    event loop (WSGI): the events stored so far, then the end."""
    async with (polling if poll else watch)(f"job:{job_id}") as watched:
        top, over, batch = await _retrying(_open, job_id, after, inline=poll)
        last = min(after, top)
        while True:
            for event in batch:
                if event.id <= last:
                    continue
                yield event
                last = event.id
                if event.terminal:
                    return
            if len(batch) == READ_BATCH:
                batch = await _retrying(_read, job_id, last, inline=poll)
                continue
            # An ended job without a terminal event (older than the events); or no lasting
            # event loop to wait on (WSGI: Django's test server): what is stored, then the end.
            if over or poll:
                return
            if not await watched.wait(keepalive):
                batch = []
                yield None
                continue
            payloads, stale = watched.take()
            announced = None if stale else _announced(payloads, job_id, last)
            if announced is None:
                announced = await _retrying(_read, job_id, last, inline=poll)
            batch = announced
