"""The id that ties a request to its job, its model calls and their log lines.

A request takes the client's ``X-Request-ID`` when it is a sane token (1 to 128 printable
ASCII characters, no space), else a new one (``core.observe``). It lives in a context
variable for the request's whole course: its thread, its event loop task, the job the
request starts (``Job.request_id``), the worker that runs that job (bound again there), and
the ``X-Request-ID`` header of every call to the model runtime.
"""

import contextlib
import os
import re
from collections.abc import Iterator
from contextvars import ContextVar

HEADER = "X-Request-ID"
MAX_LENGTH = 128
_SANE = re.compile(r"[\x21-\x7e]{1,128}")

request_id: ContextVar[str] = ContextVar("request_id", default="")
job_id: ContextVar[str] = ContextVar("job_id", default="")


def choose(offered: str | None) -> str:
    """The client's id when it is sane, else a new one."""
    if offered and _SANE.fullmatch(offered):
        return offered
    return os.urandom(16).hex()


def current() -> str:
    return request_id.get()


@contextlib.contextmanager
def bound(*, request: str, job: str = "") -> Iterator[None]:
    """Binds the ids for the block (a job run in a worker)."""
    tokens = (request_id.set(request), job_id.set(job))
    try:
        yield
    finally:
        job_id.reset(tokens[1])
        request_id.reset(tokens[0])
