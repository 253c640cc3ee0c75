"""Calls to model runtimes, as coroutines: a whole answer (:func:`agenerate`), a streamed
one (:class:`GenerationStream`), and the small calls around them (models, tokens, probes).

Routing decides the endpoints to try (``gateway.routing``); the next one is tried only
while no piece of the answer was received and the failure says the runtime is away or
busy. Each endpoint tried is one runtime call in the metrics and one ``runtime.generate``
span. Cancelling the task that awaits a call, or closing a stream, closes the connection to
the runtime, which ends the generation there. No thread: sockets are read on the loop.
"""

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core import metrics, tracing
from core.errors import error_id
from core.exceptions import RuntimeBusy, RuntimeFailure, RuntimeUnavailable, UnknownModel
from gateway import protocols, routing, runtime_errors
from gateway.routing import Endpoint
from gateway.runtime import client

# Errors after which the next endpoint of the model is tried.
FAILOVER_ERRORS = (RuntimeUnavailable, RuntimeBusy)
Messages = list[dict[str, str]] | None


class GenerationCancelled(Exception):
    """Raised by a synchronous call when ``should_stop`` turned true while it ran."""


@dataclass
class Generation:
    text: str
    model: str
    endpoint: Endpoint
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"  # or "length": OpenAI's words
    # True when the runtime reported no counts and they were counted with the model's
    # tokenizer afterwards (:func:`gateway.services.counted`).
    tokens_estimated: bool = False


def request(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    options: dict,
    *,
    messages: Messages = None,
    response_format: dict | None = None,
    stream: bool,
) -> tuple[str, dict[str, Any]]:
    """The (url, body) of a call: ``prompt`` on the generate path, or chat ``messages`` on
    the chat path with the body fields of ``response_format``."""
    build = protocols.generate_request if messages is None else protocols.chat_request
    url, body = build(
        endpoint,
        model,
        prompt if messages is None else messages,
        options,
        stream=stream,
        default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
    )
    if messages is not None:
        body.update(protocols.response_format_fields(endpoint, response_format))
    return url, body


@contextlib.contextmanager
def observed_call(
    model: str, endpoint: Endpoint, *, streamed: bool = False
) -> Iterator[Callable[[Generation], None]]:
    """The metrics and span of one generation call to ``endpoint``: the block calls the
    function it gets with the generation; an error leaving the block is its outcome."""
    started = time.perf_counter()
    traced = (
        tracing.span("runtime.generate", **{"llm.model": model, "llm.endpoint": endpoint.name})
        if tracing.enabled()
        else contextlib.nullcontext()
    )
    with traced as span:

        def observe(generation: Generation) -> None:
            if span is not None:
                tracing.set_attributes(
                    span,
                    **{
                        "llm.prompt_tokens": generation.prompt_tokens,
                        "llm.completion_tokens": generation.completion_tokens,
                        "llm.streamed": streamed,
                    },
                )

        try:
            yield observe
        except RuntimeFailure as err:
            metrics.observe_runtime_call(model, endpoint.name, error_id(err), started)
            raise
        except BaseException as exc:  # stopped (a job's cancel, a client gone) or a bug
            stopped = isinstance(exc, GeneratorExit) or type(exc).__name__ == "CancelledError"
            outcome = "cancelled" if stopped else "internal_error"
            metrics.observe_runtime_call(model, endpoint.name, outcome, started)
            raise
        metrics.observe_runtime_call(model, endpoint.name, "ok", started)


# --- The models a runtime serves -------------------------------------------------------------

_SERVED_TTL = 30.0


async def alist_models(endpoint: Endpoint) -> list[str]:
    """The models the runtime says it serves (a RuntimeFailure when it cannot be asked)."""
    url = f"{endpoint.base_url}{protocols.models_path(endpoint)}"
    return protocols.parse_models(endpoint, await client.call_json(endpoint, "GET", url, ""))


def _stale(endpoint: Endpoint, model: str) -> bool:
    cached = routing.served_models.get(endpoint.base_url)
    if cached is None:
        return True
    age = time.monotonic() - cached[0]
    return age > _SERVED_TTL or (endpoint.model_name(model) not in cached[1] and age > 5.0)


async def served(endpoint: Endpoint, model: str = "") -> frozenset[str]:
    """The models the runtime lists, asked again after a while (sooner when ``model`` is
    missing); empty when it cannot be asked now."""
    if _stale(endpoint, model):
        try:
            names = frozenset(await alist_models(endpoint))
        except RuntimeFailure:
            return frozenset()
        routing.served_models[endpoint.base_url] = (time.monotonic(), names)
    return routing.served_models[endpoint.base_url][1]


async def _require_served(endpoint: Endpoint, model: str) -> None:
    """:class:`UnknownModel` if an OpenAI-compatible runtime does not list the model.

    Some servers (llama.cpp's, llama-cpp-python's) answer any model name with the one model
    they have; asking ``/v1/models`` (cached per endpoint) keeps a typo from being served
    silently. When the list cannot be had, the call itself will tell.
    """
    if endpoint.api == "ollama":
        return
    names = await served(endpoint, model)
    if names and endpoint.model_name(model) not in names:
        raise UnknownModel(
            model, details={"runtime": endpoint.name, "available": sorted(names)[:50]}
        )


# --- Generations -----------------------------------------------------------------------------


async def agenerate_at(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    options: dict,
    *,
    messages: Messages = None,
    response_format: dict | None = None,
) -> Generation:
    """One non-streamed call to this endpoint only: no failover, no usage record."""
    chat = {"messages": messages, "response_format": response_format}
    url, body = request(endpoint, model, prompt, options, stream=False, **chat)
    data = await client.call_json(endpoint, "POST", url, model, body)
    try:
        text, p_tokens, c_tokens = protocols.parse_complete(endpoint, data)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise runtime_errors.unreadable(endpoint.name) from exc
    return Generation(
        text=text,
        model=model,
        endpoint=endpoint,
        prompt_tokens=p_tokens,
        completion_tokens=c_tokens,
        finish_reason=protocols.finish_reason(endpoint, data),
    )


async def agenerate(
    endpoints: list[Endpoint],
    model: str,
    prompt: str,
    options: dict[str, Any] | None = None,
    *,
    messages: Messages = None,
    response_format: dict | None = None,
) -> Generation:
    """Runs ``prompt`` (or chat ``messages``) on ``model`` over ``endpoints`` (resolved by
    the caller: :func:`routing.endpoints_for` may read the database) and returns the whole
    answer."""
    last_error: RuntimeFailure | None = None
    for endpoint in endpoints:
        try:
            await _require_served(endpoint, model)
            with observed_call(model, endpoint) as observe:
                generation = await agenerate_at(
                    endpoint,
                    model,
                    prompt,
                    options or {},
                    messages=messages,
                    response_format=response_format,
                )
                observe(generation)
            return generation
        except RuntimeFailure as err:
            if not isinstance(err, FAILOVER_ERRORS):
                raise
            routing.mark_failed(endpoint)
            last_error = err
    assert last_error is not None
    raise last_error


class GenerationStream:
    """One streamed generation: ``async for piece in stream`` receives the text deltas as
    the runtime sends them; afterwards :attr:`generation` holds the whole text, the token
    counts (asked for in the request: the runtime sends them last) and the finish reason.

    The next endpoint of the model is tried only before the runtime sent a piece (it was
    unreachable or busy): after that a failure ends the stream with its error. ``aclose()``,
    or cancelling the task that iterates, closes the connection to the runtime.
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
        self.chat = {"messages": messages, "response_format": response_format}
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
                await _require_served(endpoint, self.model)
                with observed_call(self.model, endpoint, streamed=True) as observe:
                    sent = time.perf_counter()
                    async with contextlib.aclosing(self._read(endpoint)) as pieces:
                        async for piece in pieces:
                            if not received:
                                received = True
                                _first_token(self.model, time.perf_counter() - sent)
                            yield piece
                    assert self.generation is not None
                    observe(self.generation)
                return
            except RuntimeFailure as err:
                if received or not isinstance(err, FAILOVER_ERRORS):
                    raise
                routing.mark_failed(endpoint)
                last_error = err
        assert last_error is not None
        raise last_error

    async def _read(self, endpoint: Endpoint) -> AsyncIterator[str]:
        url, body = request(
            endpoint, self.model, self.prompt, self.options, stream=True, **self.chat
        )
        response = await client.open_stream(endpoint, url, body, self.model)
        pieces: list[str] = []
        usage: dict | None = None
        reason = "stop"
        async with contextlib.aclosing(client.lines(endpoint, response)) as lines:
            async for line in lines:
                chunk = _chunk(endpoint, line)
                usage = chunk.usage if chunk.usage is not None else usage
                reason = chunk.finish_reason or reason
                if chunk.piece:
                    pieces.append(chunk.piece)
                    yield chunk.piece
        p_tokens, c_tokens = protocols.stream_usage(endpoint, usage)
        self.generation = Generation(
            text="".join(pieces),
            model=self.model,
            endpoint=endpoint,
            prompt_tokens=p_tokens,
            completion_tokens=c_tokens,
            finish_reason=reason,
        )


def _first_token(model: str, seconds: float) -> None:
    metrics.observe_time_to_first_token(model, seconds)
    tracing.set_attributes(tracing.current_span(), **{"llm.time_to_first_token": seconds})


def _chunk(endpoint: Endpoint, line: bytes) -> protocols.Chunk:
    try:
        return protocols.read_chunk(endpoint, line)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise runtime_errors.unreadable(
            endpoint.name, "sent an unreadable chunk", str(exc)
        ) from exc


# --- Other calls -----------------------------------------------------------------------------


async def aprobe(endpoint: Endpoint, *, timeout: float) -> str:
    """The runtime's state, learnt within about ``timeout`` seconds: ``ok``; ``busy`` when it
    took the connection but did not answer in time, or answered 503/429 (a single-slot
    runtime generating: up); otherwise the error id of why it is not up."""
    url = f"{endpoint.base_url}{protocols.models_path(endpoint)}"
    try:
        status, text = await client.answer(endpoint, "GET", url, read=timeout, connect=timeout)
        runtime_errors.raise_for_answer(status, text, endpoint.name, "")
    except RuntimeBusy:
        return "busy"
    except RuntimeFailure as err:
        timed_out = error_id(err) == "runtime_timeout"
        return "busy" if timed_out else error_id(err)
    return "ok"


async def apost_json(
    endpoint: Endpoint, path: str, body: dict[str, Any], *, model: str, read_timeout: float
) -> Any:
    """One JSON POST to ``endpoint`` (no failover) with the runtime errors of the table in
    :mod:`gateway.runtime_errors`; the parsed answer."""
    url = f"{endpoint.base_url}{path}"
    return await client.call_json(endpoint, "POST", url, model, body, read=read_timeout)
