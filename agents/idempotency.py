"""``Idempotency-Key`` on the agent API's writes: a repeat of a request answers what the
first one answered, byte for byte, and does nothing else.

The key names a request within its owner. The first request with a key inserts the key's
row, does its work and stores its answer (status, body, some headers) in ONE transaction:
either the work and its answer are both committed, or neither is. A repeat finds the row
and replays it with ``Idempotent-Replayed: true``; a repeat with another method, path or
body is :class:`IdempotencyKeyReused`. A repeat that arrives while the first is still in
its transaction waits for it: on PostgreSQL its insert of the same key waits on the
unique index (at most :data:`WAIT_SECONDS`, then :class:`IdempotencyInProgress`), on
SQLite its write transaction starts only once the first has committed (``IMMEDIATE``);
either way it then reads the committed row and replays it, so concurrent identical
requests do the work once. An error answer of the request itself (4xx) is stored too; a
5xx rolls everything back, key included, so that the client may try again.
"""

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.http import HttpResponse
from django.utils import timezone
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import IdempotencyKey
from core.db import run_again_if_dropped_at_commit
from core.errors import to_answer
from core.exceptions import (
    DomainError,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InvalidInput,
)

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
#: How long a repeat waits for the first request with its key (PostgreSQL's lock_timeout).
WAIT_SECONDS = 5
#: Headers of an answer that are stored and replayed with it.
KEPT_HEADERS = ("Retry-After",)
_LOCK_TIMEOUT = "55P03"  # PostgreSQL's lock_not_available


@dataclass
class Done:
    """What a request's work answered, and the job it made (woken again after a cut commit)."""

    response: Response
    job_id: str = ""


def respond(request: Request, work: Callable[[], Done]) -> HttpResponse:
    """Runs ``work`` once per ``Idempotency-Key`` of the request's owner (no key: each time).
    A dropped connection, even one that cut the commit, keeps that true."""
    key = request.headers.get(HEADER)
    if key is None:
        return work().response
    check_key(key)
    call = _Call(
        owner_id=request.auth.owner_id,
        key=key,
        method=request.method,
        path=request.path,
        fingerprint=fingerprint(request.method, request.path, request.body),
    )
    return run_again_if_dropped_at_commit(lambda: call.attempt(work), committed=call.committed)


def check_key(key: str) -> None:
    if not 1 <= len(key) <= 255 or not all(" " <= c <= "~" for c in key):
        raise InvalidInput({HEADER: ["Must be 1 to 255 printable ASCII characters."]})


def fingerprint(method: str, path: str, body: bytes) -> str:
    """SHA-256 of the request: its method, path and JSON body compared canonically (keys
    sorted, no spaces); a body that is not JSON compared as bytes."""
    try:
        text = json.dumps(
            json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (ValueError, RecursionError):
        text = "bytes:" + body.hex()
    return hashlib.sha256(f"{method}\n{path}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class _Call:
    owner_id: int
    key: str
    method: str
    path: str
    fingerprint: str

    def attempt(self, work: Callable[[], Done]) -> HttpResponse:
        with transaction.atomic():
            row, created = self._take()
            if not created:
                return self._replay(row)
            status, body, headers, job_id = _run(work)
            IdempotencyKey.objects.filter(pk=row.pk).update(
                status_code=status, body=body.decode(), headers=headers, job_id=job_id
            )
            return _response(status, body, headers)

    def committed(self) -> HttpResponse | None:
        """After a cut commit: the stored answer if the first run's transaction committed
        (its job woken: the lost commit ran no on-commit hook), else None."""
        from agents.services import job_committed

        row = self._stored()
        if row is None or row.fingerprint != self.fingerprint or not row.status_code:
            return None
        if row.job_id:
            job_committed(row.job_id)
        return _response(row.status_code, row.body.encode(), row.headers)

    def _stored(self) -> IdempotencyKey | None:
        return IdempotencyKey.objects.filter(owner_id=self.owner_id, key=self.key).first()

    def _take(self) -> tuple[IdempotencyKey, bool]:
        """The key's row: the committed one of an earlier request (False), or a new one of
        this request (True), inserted after any earlier transaction with the key ended."""
        now = timezone.now()
        row = self._stored()
        if row is not None and row.expires_at > now:
            return row, False
        if row is not None:
            IdempotencyKey.objects.filter(pk=row.pk, expires_at__lte=now).delete()
        try:
            with transaction.atomic(), _waiting_at_most(WAIT_SECONDS):
                created = IdempotencyKey.objects.create(
                    owner_id=self.owner_id,
                    key=self.key,
                    fingerprint=self.fingerprint,
                    method=self.method,
                    path=self.path,
                    created_at=now,
                    expires_at=now + timedelta(seconds=settings.IDEMPOTENCY_TTL),
                )
        except IntegrityError:  # another request with the key committed first
            return IdempotencyKey.objects.get(owner_id=self.owner_id, key=self.key), False
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) == _LOCK_TIMEOUT:
                raise IdempotencyInProgress(self.key) from exc
            raise
        return created, True

    def _replay(self, row: IdempotencyKey) -> HttpResponse:
        if row.fingerprint != self.fingerprint:
            raise IdempotencyKeyReused(self.key)
        response = _response(row.status_code, row.body.encode(), row.headers)
        response[REPLAYED] = "true"
        return response


@contextmanager
def _waiting_at_most(seconds: float) -> Iterator[None]:
    """On PostgreSQL, a lock wait in the block (the insert of a key another transaction
    holds) fails after ``seconds``. SQLite's writers wait at ``BEGIN IMMEDIATE`` instead."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout')")
        (before,) = cursor.fetchone()
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(seconds * 1000)}ms"])
    yield
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [before])


def _run(work: Callable[[], Done]) -> tuple[int, bytes, dict[str, str], str]:
    """Runs the work in a savepoint: its answer, rendered, or its 4xx error answer (its
    writes undone). A 5xx propagates and undoes the whole transaction."""
    try:
        with transaction.atomic():
            done = work()
    except (DomainError, APIException) as exc:
        answer = to_answer(exc)
        if answer.status >= 500:
            raise
        return answer.status, _render(answer.body()), _kept(answer.headers), ""
    response = done.response
    headers = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
    return response.status_code, _render(response.data), headers, done.job_id


def _kept(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name in KEPT_HEADERS}


def _render(data: object) -> bytes:
    return JSONRenderer().render(data)


def _response(status: int, body: bytes, headers: dict[str, str]) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type="application/json")
    for name, value in headers.items():
        response[name] = value
    return response
