"""The asynchronous half of the runtime client, for ``POST /api.php``'s async view.

The same protocols (``gateway.protocols``), routing (``gateway.routing``), timeouts and
meaning of the runtime's answers (``gateway.runtime``, ``gateway.runtime_errors``) as the
synchronous client of the agents; only the I/O differs: an aiohttp session, on which one
process holds hundreds of calls in flight while each waits on the model. aiohttp rather
than httpx: measured here, a tenth of httpx's CPU per call (about 0.3 ms against 4 ms),
which decides how many calls a process can serve.

A session belongs to the event loop it was made in (its pooled connections do), so there
is one per loop: one per server process, or one per request where a synchronous server
runs the view on a loop of its own; it is closed when its loop shuts down.

Cancelling the task that awaits a call (Django does when the client of /api.php goes
away) closes the connection to the runtime, which ends the generation there.
"""

import asyncio
import json
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from django.conf import settings

from core.exceptions import RuntimeFailure, RuntimeTimeout, RuntimeUnavailable
from gateway import protocols, routing, runtime
from gateway.routing import Endpoint
from gateway.runtime import Generation

_sessions: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, AsyncIterator[None]]
] = weakref.WeakKeyDictionary()


async def _closed_with_the_loop(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Suspended until its loop shuts down, which closes the async generators it knows of
    (``asyncio.run`` does): then closes ``session``."""
    try:
        yield
    finally:
        await session.close()


async def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    kept = _sessions.get(loop)
    if kept is not None and not kept[0].closed:
        return kept[0]
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=settings.RUNTIME_MAX_CONNECTIONS),
        # As the sync session: no cookies kept, no proxy settings from the environment.
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
    )
    closer = _closed_with_the_loop(session)
    await anext(closer)  # runs to its yield at once: nothing else runs in between
    _sessions[loop] = (session, closer)
    return session


def _transport_error(exc: Exception, endpoint: Endpoint) -> RuntimeFailure:
    if isinstance(exc, TimeoutError) and not isinstance(exc, aiohttp.ConnectionTimeoutError):
        return RuntimeTimeout(
            details={"runtime": endpoint.name, "timeout_seconds": settings.RUNTIME_READ_TIMEOUT}
        )
    return RuntimeUnavailable(details={"runtime": endpoint.name})


async def _call(
    endpoint: Endpoint, method: str, url: str, model: str, body: dict | None = None
) -> Any:
    """One request; the JSON of a 200 answer, else the error the answer means."""
    headers = runtime.headers_for(endpoint)
    data = None
    if body is not None:
        # As the sync session: refuse NaN, send UTF-8, say it is JSON.
        data = json.dumps(body, allow_nan=False).encode()
        headers = {**headers, "Content-Type": "application/json"}
    try:
        session = await _session()
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=settings.RUNTIME_CONNECT_TIMEOUT,
            sock_read=settings.RUNTIME_READ_TIMEOUT,
        )
        async with session.request(
            method, url, data=data, headers=headers, timeout=timeout
        ) as response:
            status, text = response.status, await response.text()
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise _transport_error(exc, endpoint) from exc
    runtime.raise_for_answer(status, text, endpoint, model)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise runtime.unreadable(endpoint) from exc


async def list_models(endpoint: Endpoint) -> list[str]:
    """:func:`gateway.runtime.list_models`, awaited."""
    url = f"{endpoint.base_url}{protocols.models_path(endpoint)}"
    return protocols.parse_models(endpoint, await _call(endpoint, "GET", url, ""))


async def generate_at(endpoint: Endpoint, model: str, prompt: str, options: dict) -> Generation:
    """:func:`gateway.runtime.generate_at`, awaited: one call to this endpoint only."""
    url, body = protocols.generate_request(
        endpoint,
        model,
        prompt,
        options,
        stream=False,
        default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
    )
    data = await _call(endpoint, "POST", url, model, body)
    return runtime.generation_from(endpoint, model, data)


async def _require_served(endpoint: Endpoint, model: str) -> None:
    if runtime.served_list_is_stale(endpoint, model):
        try:
            served = await list_models(endpoint)
        except RuntimeFailure:
            return
        routing.served_models[endpoint.base_url] = (time.monotonic(), frozenset(served))
    runtime.check_served(endpoint, model)


async def generate(
    endpoints: list[Endpoint], model: str, prompt: str, options: dict[str, Any] | None = None
) -> Generation:
    """:func:`gateway.runtime.generate` (without ``should_stop`` or ``messages``), awaited,
    over ``endpoints``: :func:`routing.endpoints_for` reads the database, so the caller
    resolves them before it lets its connection go."""
    options = options or {}
    last_error: RuntimeFailure | None = None
    for endpoint in endpoints:
        try:
            if endpoint.api != "ollama":
                await _require_served(endpoint, model)
            return await generate_at(endpoint, model, prompt, options)
        except RuntimeFailure as err:
            if not isinstance(err, runtime.FAILOVER_ERRORS):
                raise
            routing.mark_failed(endpoint)
            last_error = err
    assert last_error is not None
    raise last_error
