"""The HTTP I/O of the runtime client: one aiohttp session per event loop.

aiohttp, on which one process holds hundreds of calls in flight while each waits on the
model, at a small CPU cost per call (``bench/RESULTS.md``). Every call is a GET, or a POST
of a JSON body, to a URL built from a configured base URL: no cookies kept, no proxy or
``.netrc`` settings from the environment.

A session belongs to the event loop it was made in (its pooled connections do), so there
is one per loop: the web server's loop, and the loop of the sync entry
(:mod:`gateway.runtime.sync`); it is closed when its loop shuts down.
"""

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from django.conf import settings

from core import requestid
from core.exceptions import RuntimeFailure, RuntimeTimeout, RuntimeUnavailable
from gateway import runtime_errors
from gateway.routing import Endpoint

_sessions: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, AsyncIterator[None]]
] = weakref.WeakKeyDictionary()


async def _closed_with_the_loop(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Suspended until its loop shuts down, which closes the async generators it knows of
    (``asyncio.run`` and :func:`gateway.runtime.sync` do): then closes ``session``."""
    try:
        yield
    finally:
        await session.close()


async def session() -> aiohttp.ClientSession:
    """The session of the running loop (made on first use)."""
    loop = asyncio.get_running_loop()
    kept = _sessions.get(loop)
    if kept is not None and not kept[0].closed:
        return kept[0]
    made = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=settings.RUNTIME_MAX_CONNECTIONS),
        cookie_jar=aiohttp.DummyCookieJar(),  # one client's cookies never reach another's
        trust_env=False,  # runtimes are configured explicitly
    )
    closer = _closed_with_the_loop(made)
    await anext(closer)  # runs to its yield at once: nothing else runs in between
    _sessions[loop] = (made, closer)
    return made


def headers_for(endpoint: Endpoint) -> dict[str, str]:
    """The endpoint's key, and the id of the request the call is made for."""
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    rid = requestid.current()
    if rid:
        headers[requestid.HEADER] = rid
    return headers


def timeout(read: float | None = None, connect: float | None = None) -> aiohttp.ClientTimeout:
    """Seconds to connect, and to wait for each read (not for the whole answer)."""
    return aiohttp.ClientTimeout(
        total=None,
        sock_connect=settings.RUNTIME_CONNECT_TIMEOUT if connect is None else connect,
        sock_read=settings.RUNTIME_READ_TIMEOUT if read is None else read,
    )


def transport_error(
    exc: Exception, endpoint: Endpoint, read: float | None = None
) -> RuntimeFailure:
    """What a failure to get an answer means: no answer in time, else unreachable."""
    if isinstance(exc, TimeoutError) and not isinstance(exc, aiohttp.ConnectionTimeoutError):
        waited = settings.RUNTIME_READ_TIMEOUT if read is None else read
        return RuntimeTimeout(details={"runtime": endpoint.name, "timeout_seconds": waited})
    return RuntimeUnavailable(details={"runtime": endpoint.name})


# Sends of one request at most, when the server closes the connection before answering.
SENDS = 3


async def send(method: str, url: str, **kwargs: Any) -> aiohttp.ClientResponse:
    """The response to one request, its body still to read. A server may close a kept-alive
    connection just as a request goes out on it (llama.cpp's server closes one idle for 5 s;
    on a busy machine the client sees the close too late): the request is then sent again,
    on another connection, as long as no answer to it has begun (``SENDS`` in all)."""
    for _ in range(SENDS - 1):
        try:
            return await (await session()).request(method, url, **kwargs)
        except aiohttp.ServerDisconnectedError:
            continue
    return await (await session()).request(method, url, **kwargs)


def _body(body: dict[str, Any] | None, headers: dict[str, str]) -> bytes | None:
    if body is None:
        return None
    headers["Content-Type"] = "application/json"
    return json.dumps(body, allow_nan=False).encode()  # NaN refused, UTF-8


async def answer(
    endpoint: Endpoint,
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
    *,
    read: float | None = None,
    connect: float | None = None,
) -> tuple[int, str]:
    """One request: the status and text of the answer (transport failures raised as the
    runtime errors they mean)."""
    headers = headers_for(endpoint)
    data = _body(body, headers)
    try:
        response = await send(
            method, url, data=data, headers=headers, timeout=timeout(read, connect)
        )
        async with response:
            return response.status, await response.text()
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise transport_error(exc, endpoint, read) from exc


async def call_json(
    endpoint: Endpoint,
    method: str,
    url: str,
    model: str,
    body: dict[str, Any] | None = None,
    *,
    read: float | None = None,
) -> Any:
    """One request; the JSON of a 200 answer, else the error the answer means."""
    status, text = await answer(endpoint, method, url, body, read=read)
    runtime_errors.raise_for_answer(status, text, endpoint.name, model)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise runtime_errors.unreadable(endpoint.name) from exc


async def open_stream(
    endpoint: Endpoint, url: str, body: dict[str, Any], model: str
) -> aiohttp.ClientResponse:
    """The runtime's 200 answer with its body still to read, else the error it means."""
    headers = headers_for(endpoint)
    data = _body(body, headers)
    try:
        response = await send("POST", url, data=data, headers=headers, timeout=timeout())
        if response.status != 200:
            status, text = response.status, await response.text()
            response.release()
            runtime_errors.raise_for_answer(status, text, endpoint.name, model)
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise transport_error(exc, endpoint) from exc
    return response


async def lines(endpoint: Endpoint, response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The non-empty lines of a streamed answer as they arrive. Closed before the end (the
    consumer stopped, or was cancelled), it closes the connection, which tells the runtime
    to stop generating; read to the end, the connection goes back to the pool."""
    done = False
    try:
        async for raw in response.content:
            line = raw.strip()
            if line:
                yield line
        done = True
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise transport_error(exc, endpoint) from exc
    finally:
        if done:
            response.release()
        else:
            response.close()
