"""The asynchronous half of the runtime client, for the web's async views (``/api.php``,
``/v1/``): whole answers (:func:`generate`) and streamed ones (:class:`GenerationStream`).

The same protocols (``gateway.protocols``), routing (``gateway.routing``), timeouts and
meaning of the runtime's answers (``gateway.runtime``, ``gateway.runtime_errors``) as the
synchronous client of the agents; only the I/O differs: an aiohttp session, on which one
process holds hundreds of calls in flight while each waits on the model. aiohttp rather
than httpx: measured here, a tenth of httpx's CPU per call (about 0.3 ms against 4 ms),
which decides how many calls a process can serve.

A session belongs to the event loop it was made in (its pooled connections do), so there
is one per loop: one per server process, or one per request where a synchronous server
runs the view on a loop of its own; it is closed when its loop shuts down.

Cancelling the task that awaits a call, or closing a stream (Django does either when the
client goes away) closes the connection to the runtime, which ends the generation there.
"""

import asyncio
import contextlib
import json
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from django.conf import settings

from core import metrics
from core.exceptions import RuntimeAnswerError, RuntimeFailure, RuntimeTimeout, RuntimeUnavailable
from gateway import protocols, routing, runtime
from gateway.routing import Endpoint
from gateway.runtime import Generation
from gateway.runtime_errors import one_line

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


def _timeout() -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(
        total=None,
        sock_connect=settings.RUNTIME_CONNECT_TIMEOUT,
        sock_read=settings.RUNTIME_READ_TIMEOUT,
    )


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
        async with session.request(
            method, url, data=data, headers=headers, timeout=_timeout()
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


Messages = list[dict[str, str]] | None


def _request(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    options: dict,
    *,
    messages: Messages,
    response_format: dict | None,
    stream: bool,
) -> tuple[str, dict[str, Any]]:
    """The (url, body) of a call: ``prompt`` on the generate path, or chat ``messages`` on
    the chat path with the body fields of ``response_format``."""
    if messages is None:
        return protocols.generate_request(
            endpoint,
            model,
            prompt,
            options,
            stream=stream,
            default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
        )
    url, body = protocols.chat_request(
        endpoint,
        model,
        messages,
        options,
        stream=stream,
        default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
    )
    body.update(protocols.response_format_fields(endpoint, response_format))
    return url, body


async def generate_at(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    options: dict,
    *,
    messages: Messages = None,
    response_format: dict | None = None,
) -> Generation:
    """:func:`gateway.runtime.generate_at`, awaited: one call to this endpoint only."""
    url, body = _request(
        endpoint,
        model,
        prompt,
        options,
        messages=messages,
        response_format=response_format,
        stream=False,
    )
    data = await _call(endpoint, "POST", url, model, body)
    return runtime.generation_from(endpoint, model, data)


async def served(endpoint: Endpoint) -> frozenset[str]:
    """The models the runtime lists, kept as :func:`gateway.runtime.served_list_is_stale`
    says; empty when it cannot be asked now."""
    if runtime.served_list_is_stale(endpoint, ""):
        try:
            names = frozenset(await list_models(endpoint))
        except RuntimeFailure:
            return frozenset()
        routing.served_models[endpoint.base_url] = (time.monotonic(), names)
    return routing.served_models[endpoint.base_url][1]


async def _require_served(endpoint: Endpoint, model: str) -> None:
    if runtime.served_list_is_stale(endpoint, model):
        try:
            served = await list_models(endpoint)
        except RuntimeFailure:
            return
        routing.served_models[endpoint.base_url] = (time.monotonic(), frozenset(served))
    runtime.check_served(endpoint, model)


async def generate(
    endpoints: list[Endpoint],
    model: str,
    prompt: str,
    options: dict[str, Any] | None = None,
    *,
    messages: Messages = None,
    response_format: dict | None = None,
) -> Generation:
    """:func:`gateway.runtime.generate` (without ``should_stop``), awaited, over
    ``endpoints``: :func:`routing.endpoints_for` reads the database, so the caller
    resolves them before it lets its connection go."""
    options = options or {}
    last_error: RuntimeFailure | None = None
    for endpoint in endpoints:
        try:
            if endpoint.api != "ollama":
                await _require_served(endpoint, model)
            with runtime.observed_call(model, endpoint) as observe:
                generation = await generate_at(
                    endpoint,
                    model,
                    prompt,
                    options,
                    messages=messages,
                    response_format=response_format,
                )
                observe(generation)
            return generation
        except RuntimeFailure as err:
            if not isinstance(err, runtime.FAILOVER_ERRORS):
                raise
            routing.mark_failed(endpoint)
            last_error = err
    assert last_error is not None
    raise last_error


class GenerationStream:
    """One streamed generation: ``async for piece in stream`` receives the text deltas as
    the runtime sends them; afterwards :attr:`generation` holds the whole text, the token
    counts (asked for in the request: the runtime sends them last) and the finish reason.

    The next endpoint of the model is tried only before the runtime accepted the call
    (unreachable, busy): once a piece was received, a failure ends the stream with its
    error. ``aclose()``, or cancelling the task that iterates, closes the connection to
    the runtime, which ends the generation there. No thread: the socket is read on the
    event loop.
    """

    def __init__(
        self,
        endpoints: list[Endpoint],
        model: str,
        prompt: str,
        options: dict[str, Any] | None = None,
        *,
        messages: Messages = None,
        response_format: dict | None = None,
    ) -> None:
        self.endpoints, self.model, self.prompt = endpoints, model, prompt
        self.options = options or {}
        self.messages, self.response_format = messages, response_format
        self.generation: Generation | None = None
        self._pieces = self._run()

    def __aiter__(self) -> "GenerationStream":
        return self

    async def __anext__(self) -> str:
        return await anext(self._pieces)

    async def aclose(self) -> None:
        await self._pieces.aclose()

    async def _run(self) -> AsyncIterator[str]:
        last_error: RuntimeFailure | None = None
        for endpoint in self.endpoints:
            received = False
            try:
                if endpoint.api != "ollama":
                    await _require_served(endpoint, self.model)
                # Each endpoint tried is one runtime call in the metrics, as on the sync path.
                with runtime.observed_call(self.model, endpoint, streamed=True) as observe:
                    sent = time.perf_counter()
                    response = await self._open(endpoint)
                    # Closed with this generator, so that the connection closes at once.
                    async with contextlib.aclosing(self._read(endpoint, response)) as pieces:
                        async for piece in pieces:
                            if not received:
                                received = True
                                metrics.observe_time_to_first_token(
                                    self.model, time.perf_counter() - sent
                                )
                            yield piece
                    observe(self.generation)
                return
            except RuntimeFailure as err:
                # Another endpoint only before the runtime sent anything.
                if received or not isinstance(err, runtime.FAILOVER_ERRORS):
                    raise
                routing.mark_failed(endpoint)
                last_error = err
        assert last_error is not None
        raise last_error

    async def _open(self, endpoint: Endpoint) -> aiohttp.ClientResponse:
        """The runtime's 200 answer with its body still to read, else the error it means."""
        url, body = _request(
            endpoint,
            self.model,
            self.prompt,
            self.options,
            messages=self.messages,
            response_format=self.response_format,
            stream=True,
        )
        headers = {**runtime.headers_for(endpoint), "Content-Type": "application/json"}
        try:
            response = await (await _session()).post(
                url,
                data=json.dumps(body, allow_nan=False).encode(),
                headers=headers,
                timeout=_timeout(),
            )
            if response.status != 200:
                status, text = response.status, await response.text()
                response.release()
                runtime.raise_for_answer(status, text, endpoint, self.model)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _transport_error(exc, endpoint) from exc
        return response

    async def _read(
        self, endpoint: Endpoint, response: aiohttp.ClientResponse
    ) -> AsyncIterator[str]:
        pieces: list[str] = []
        usage: dict | None = None
        reason = "stop"
        done = False
        try:
            async for raw in response.content:
                line = raw.strip()
                if not line:
                    continue
                chunk = _chunk(endpoint, line)
                if chunk.usage is not None:
                    usage = chunk.usage
                reason = chunk.finish_reason or reason
                if chunk.piece:
                    pieces.append(chunk.piece)
                    yield chunk.piece
                if chunk.done:
                    break
            done = True
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _transport_error(exc, endpoint) from exc
        finally:
            if done:
                response.release()
            else:  # cut off: the runtime sees the connection close and stops generating
                response.close()
        p_tokens, c_tokens = protocols.stream_usage(endpoint, usage)
        self.generation = Generation(
            text="".join(pieces),
            model=self.model,
            endpoint=endpoint,
            prompt_tokens=p_tokens,
            completion_tokens=c_tokens,
            finish_reason=reason,
        )


def _chunk(endpoint: Endpoint, line: bytes) -> protocols.Chunk:
    try:
        return protocols.read_chunk(endpoint, line)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise RuntimeAnswerError(
            "The model runtime sent an unreadable chunk.",
            details={"runtime": endpoint.name, "runtime_message": one_line(str(exc))},
        ) from exc
