"""The gunicorn worker of the web server: uvicorn running ``config.asgi`` on one event loop
per process (uvloop and httptools when installed), so that a process holds hundreds of
requests at once while they wait on the model runtime.
"""

import contextlib
import importlib
import json
from typing import Any

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


class Worker(UvicornWorker):
    # Django speaks no ASGI lifespan, so it is not offered.
    CONFIG_KWARGS = {"loop": "auto", "http": "auto", "lifespan": "off"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # gunicorn's worker_connections, which uvicorn's worker leaves unused: beyond it
        # uvicorn answers 503 (server_busy, above) instead of taking more connections than
        # the process can hold.
        self.config.limit_concurrency = self.cfg.worker_connections
