"""Writing a job's events (the worker's side; ``agents.eventbus`` delivers them).

An event is a :class:`JobEvent` row written in the transaction of the change it tells of
(a status change, a step started or ended), or in a transaction of its own (the tokens of
a model call). Its ``seq`` is the job's last one plus one; a concurrent writer (a cancel
from the web while the worker writes) makes the insert fail on the unique ``(job, seq)``,
and the next number is tried: so the numbers of a job's events are committed in order, and
a reader that saw event ``n`` has seen every event before it.

Once written, an event is announced to every web process (``publish``): through Redis
pub/sub when ``REDIS_URL`` is set (after the commit), through PostgreSQL's ``NOTIFY`` in the
same transaction (PostgreSQL delivers it at the commit, in commit order), and not at all on
SQLite, whose web processes poll the table (``agents.eventbus``). An announcement carries
the event itself, so a web process sends it on without reading it back; one that is lost
is made up for by the readers, which read the table after the last event they sent.
"""

import json
import logging
import time
from collections import OrderedDict
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from django.db.models import Max

from agents.event_models import JobEvent, JobEventType
from agents.models import TERMINAL, Job, Step
from core.db import release_pooled_connections, run_again_if_dropped_at_commit
from core.http import storable

logger = logging.getLogger(__name__)

#: The pub/sub channel (Redis) and the NOTIFY channel (PostgreSQL) of the announcements.
CHANNEL = "llmgw_events"
# PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more: a bigger event is announced
# without its data (readers then read it from the table).
_NOTIFY_LIMIT = 7_900

# The last seq this process wrote per job: the next insert tries the one after it without
# asking the table (a miss costs one failed insert and a read). Bounded, oldest out first.
_last_seq: OrderedDict[str, int] = OrderedDict()
_LAST_SEQ_KEEP = 4_096


def bus_kind() -> str:
    """How events reach the web processes: ``redis``, ``postgresql`` or ``poll``."""
    if settings.REDIS_URL:
        return "redis"
    return "postgresql" if connection.vendor == "postgresql" else "poll"


def _next_seq(job_id: str) -> int:
    known = _last_seq.get(job_id)
    if known is not None:
        return known + 1
    last = JobEvent.objects.filter(job_id=job_id).aggregate(last=Max("seq"))["last"]
    return (last or 0) + 1


def _remember(job_id: str, seq: int) -> None:
    _last_seq[job_id] = seq
    _last_seq.move_to_end(job_id)
    while len(_last_seq) > _LAST_SEQ_KEEP:
        _last_seq.popitem(last=False)


def event_emit(job: Job, type: str, data: dict[str, Any], *, first: bool = False) -> JobEvent:
    """Writes the job's next event in the current transaction (a savepoint of it) and
    announces it once committed. ``first``: the job was just created (its seq is 1)."""
    seq = 1 if first else _next_seq(job.pk)
    for _ in range(20):
        try:
            with transaction.atomic():
                event = JobEvent.objects.create(job_id=job.pk, seq=seq, type=type, data=data)
                _publish(announcement(job, event))
            break
        except IntegrityError:  # another writer took this number: ask the table
            _last_seq.pop(job.pk, None)
            seq = _next_seq(job.pk)
    else:  # pragma: no cover - twenty writers at once on one job
        raise RuntimeError(f"Job {job.pk}: no free event number")
    _remember(job.pk, seq)
    return event


def announcement(job: Job, event: JobEvent) -> str:
    """The JSON that announces ``event`` to the web processes."""
    body = {
        "job": job.pk,
        "conversation": job.conversation_id,
        "id": event.seq,
        "type": event.type,
        "data": event.data,
    }
    text = json.dumps(body, cls=DjangoJSONEncoder, separators=(",", ":"))
    if len(text.encode()) > _NOTIFY_LIMIT:
        body.pop("data")
        text = json.dumps(body, separators=(",", ":"))
    return text


def announce(key: str, payload: dict[str, Any]) -> None:
    """Tells the web processes that something new is stored for ``key`` (for instance
    ``conversation:<id>``), once the current transaction commits; watchers of the key
    (``agents.eventbus.watch``) wake up and read it."""
    _publish(json.dumps({**payload, "key": key}, cls=DjangoJSONEncoder, separators=(",", ":")))


def _publish(text: str) -> None:
    kind = bus_kind()
    if kind == "postgresql":  # delivered by PostgreSQL at the commit
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, text])
    elif kind == "redis":
        transaction.on_commit(lambda: _redis_publish(text))


_redis: list[Any] = []


def _redis_publish(text: str) -> None:
    """Publishes on Redis; a Redis that is away loses the announcement, not the event (the
    web processes read the table again when their own connection comes back)."""
    import redis

    if not _redis:
        _redis.append(
            redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        )
    try:
        _redis[0].publish(CHANNEL, text)
    except redis.RedisError as exc:
        logger.warning("Event announcement not published (%s); readers will catch up", exc)


# --- What the events say ------------------------------------------------------------------


def status_data(job: Job, status: str, **fields: Any) -> dict[str, Any]:
    """A status event's data: the job's id and status; a terminal one also carries what
    ``GET /agent/job/{id}`` shows then (``final_result`` or ``error``)."""
    data: dict[str, Any] = {"job_id": job.pk, "status": status}
    if status in TERMINAL:
        if fields.get("final_result") is not None:
            data["final_result"] = fields["final_result"]
        if fields.get("error"):
            data["error"] = fields["error"]
    return data


def status_emit(job: Job, status: str, *, first: bool = False, **fields: Any) -> None:
    event_emit(job, JobEventType.STATUS, status_data(job, status, **fields), first=first)


def step_emit(job: Job, step: Step, *, attempt: int | None = None) -> None:
    """A step event: the step as ``GET /agent/job/{id}`` shows it; ``attempt`` marks a step
    of a run that was lost (its worker died) and that the reaper ended."""
    from agents.serializers import StepSerializer

    data = dict(StepSerializer(step).data)
    if attempt is not None:
        data["attempt"] = attempt
    event_emit(job, JobEventType.STEP, json.loads(json.dumps(data, cls=DjangoJSONEncoder)))


class TokenEvents:
    """The ``token`` events of one model-call step: text deltas coalesced so that a job
    writes at most one event per ``EVENTS_TOKEN_SECONDS`` (the first one at once), their
    concatenation exact. Call it with each delta; :meth:`flush` writes what is left."""

    def __init__(self, job: Job, step_index: int, *, interval: float | None = None) -> None:
        self.job = job
        self.step_index = step_index
        self.interval = settings.EVENTS_TOKEN_SECONDS if interval is None else interval
        self._pending: list[str] = []
        self._last_write = 0.0

    def __call__(self, text: str) -> None:
        if not text:
            return
        self._pending.append(text)
        if time.monotonic() - self._last_write >= self.interval:
            self.flush()

    def flush(self) -> None:
        # As the stored reply is (a NUL or an unpaired surrogate becomes U+FFFD, one
        # character for one, so the streamed text still adds up to the stored one), and as
        # PostgreSQL's JSON must be.
        text = storable("".join(self._pending))
        if not text:
            return
        self._pending.clear()
        data = {"step": self.step_index, "text": text}
        before = _last_seq.get(self.job.pk) or _next_seq(self.job.pk) - 1

        def write() -> JobEvent:  # a transaction of its own: event_emit's
            return event_emit(self.job, JobEventType.TOKEN, data)

        def committed() -> JobEvent | None:  # a write whose commit was cut: did it land?
            found = JobEvent.objects.filter(job_id=self.job.pk, seq__gt=before, data=data)
            return found.filter(type=JobEventType.TOKEN).first()

        # The model keeps generating while the database drops a connection: the text is
        # written once, on a new one (a duplicate or a loss would break the stream's text).
        run_again_if_dropped_at_commit(write, committed=committed)
        self._last_write = time.monotonic()
        release_pooled_connections()  # the model still generates: hold no connection
