"""The gunicorn worker of the web server: uvicorn running ``config.asgi`` on one event loop
per process (uvloop and httptools), so that a process holds hundreds of requests at once
while they wait on the model runtime.

uvicorn's HTTP protocol is given what it lacks against slow or greedy clients
(:class:`GuardedProtocol`): time limits for a request's headers and body, a limit of
connections per client address, and its own refusals in the error envelope.
"""

import asyncio
import contextlib
import importlib
import json
import logging
import re
import resource
from collections import Counter
from typing import Any, ClassVar

from django.conf import settings
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn_worker import UvicornWorker

_busy: list[bytes] = []


async def server_busy(scope: Any, receive: Any, send: Any) -> None:
    """uvicorn's answer to a connection beyond the process's limit, in the error envelope
    (503 ``server_busy``, ``Retry-After: 1``) instead of its plain-text one."""
    if not _busy:  # built on first use: Django is set up by then
        from core.errors import to_answer
        from core.exceptions import ServerBusy

        _busy.append(json.dumps(to_answer(ServerBusy()).body()).encode())
    body = _busy[0]
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


# Each of uvicorn's HTTP protocols looks its over-the-limit answer up by this name.
for _name in ("httptools_impl", "h11_impl"):
    with contextlib.suppress(ImportError):
        importlib.import_module(f"uvicorn.protocols.http.{_name}").service_unavailable = server_busy


def _envelope(exc: Exception) -> tuple[int, bytes, dict[str, str]]:
    from core.errors import to_answer

    answer = to_answer(exc)
    return answer.status, json.dumps(answer.body()).encode(), answer.headers


_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 429: b"Too Many Requests"}


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with:

    * a time limit for a request's headers (``WEB_HEADER_TIMEOUT`` from its first byte, or
      from the connection) and for its body (``WEB_BODY_TIMEOUT`` from its headers): past
      it, 408 ``request_timeout`` if no answer was started, and the connection is closed
      (uvicorn itself waits for a request that never ends);
    * at most ``WEB_MAX_CONNECTIONS_PER_CLIENT`` connections per client address in this
      process: more are answered 429 ``too_many_connections`` and closed;
    * its refusal of a malformed request in the error envelope (400 ``bad_request``).
    """

    per_client: ClassVar[Counter] = Counter()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._timer: asyncio.TimerHandle | None = None
        self._address = self.client[0] if self.client else None
        if self._address is not None:
            self.per_client[self._address] += 1
            limit = settings.WEB_MAX_CONNECTIONS_PER_CLIENT
            if limit and self.per_client[self._address] > limit:
                from core.exceptions import TooManyConnections

                self._refuse(TooManyConnections())
                return
        self._arm(settings.WEB_HEADER_TIMEOUT)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._address is not None:
            self.per_client[self._address] -= 1
            if self.per_client[self._address] <= 0:
                del self.per_client[self._address]
            self._address = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(settings.WEB_HEADER_TIMEOUT)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(settings.WEB_BODY_TIMEOUT)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        from core.exceptions import BadRequest

        self._refuse(BadRequest(f"{msg.rstrip('.')}: the request is not valid HTTP/1.1."))

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if getattr(self, "_timer", None) is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()  # an answer is on its way: it cannot become a 408
            return
        from core.exceptions import RequestTimeout

        self._refuse(RequestTimeout())

    def _refuse(self, exc: Exception) -> None:
        """Answers ``exc`` in the envelope and closes the connection."""
        self._disarm()
        status, body, extra = _envelope(exc)
        head = [b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"Error"))]
        headers = {"content-type": "application/json", "content-length": str(len(body))}
        headers.update({name.lower(): value for name, value in extra.items()})
        headers["connection"] = "close"
        head += [f"{name}: {value}".encode("latin-1") for name, value in headers.items()]
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        self.transport.close()


# An API key sent in a query string is never written to the access log.
_KEY_IN_TEXT = re.compile(r"(llmgw_[a-z0-9]+)_[A-Za-z0-9]+")
_SECRET_PARAM = re.compile(r"((?:^|[?&])(?:api_key|key|token|access_token)=)[^&\s\"]*", re.I)


class RedactKeys(logging.Filter):
    """Masks API keys (all but their public prefix) and the values of key-like query
    parameters in a log record's arguments: the access log writes the full request path."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_redact(arg) for arg in record.args)
        return True


def _redact(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return _SECRET_PARAM.sub(r"\1[redacted]", _KEY_IN_TEXT.sub(r"\1_[redacted]", value))


def _allow_open_files(connections: int) -> None:
    """Raises this process's limit of open files to what its connections need (an event
    stream keeps its socket open for minutes; a common soft limit is 1,024), within the
    hard limit the system sets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 256  # its database, runtime and log files besides
    if soft != resource.RLIM_INFINITY and soft < wanted:
        limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


class Worker(UvicornWorker):
    # Django speaks no ASGI lifespan, so it is not offered.
    CONFIG_KWARGS = {"loop": "auto", "http": GuardedProtocol, "lifespan": "off"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # gunicorn's worker_connections, which uvicorn's worker leaves unused: beyond it
        # uvicorn answers 503 (server_busy, above) instead of taking more connections than
        # the process can hold.
        self.config.limit_concurrency = self.cfg.worker_connections
        _allow_open_files(self.cfg.worker_connections)
        for name in ("uvicorn.access", "gunicorn.access"):
            logging.getLogger(name).addFilter(RedactKeys())
