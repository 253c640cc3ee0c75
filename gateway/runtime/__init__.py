"""The one client of the model runtimes: Ollama (``/api/generate``, ``/api/chat``) and
OpenAI-compatible servers (``/v1/completions``, ``/v1/chat/completions``).

The prompt is sent exactly as given and alone: no history, never Ollama's ``context``; an
agent may send chat ``messages`` instead, the whole context of that one call. Options are
passed through under Ollama's names, or mapped to OpenAI's (``gateway.protocols``, pure).
Failures raise the domain errors of :mod:`core.exceptions`, read from the runtime's answer
by :mod:`gateway.runtime_errors` (pure).

One async core (aiohttp, :mod:`.client` and :mod:`.calls`): the web's async views await
it on their own loop. Synchronous code (the worker, the admin, commands) calls the
functions below, which run the same coroutines on one loop thread per process
(:mod:`.sync`): a streamed call hands its deltas to ``on_delta`` in the calling thread, and
``should_stop`` cancels it.
"""

from collections.abc import Callable, Iterator
from contextlib import aclosing
from typing import Any

from gateway import routing
from gateway.routing import Endpoint
from gateway.runtime.calls import (
    FAILOVER_ERRORS,
    Generation,
    GenerationCancelled,
    GenerationStream,
    Messages,
    agenerate,
    agenerate_at,
    alist_models,
    apost_json,
    aprobe,
    served,
)
from gateway.runtime.sync import blocking, post, run, run_all
from gateway.runtime.tokens import acount_tokens_at, forget_tokenizers

__all__ = [
    "FAILOVER_ERRORS",
    "Generation",
    "GenerationCancelled",
    "GenerationStream",
    "acount_tokens_at",
    "agenerate",
    "astream",
    "blocking",
    "count_tokens",
    "forget_tokenizers",
    "generate",
    "generate_at",
    "iter_endpoints",
    "list_models",
    "post",
    "post_json",
    "probe_all",
    "run",
    "served",
]


async def astream(stream: GenerationStream, on_delta: Callable[[str], None] | None) -> Generation:
    """Reads ``stream`` to its end, each delta posted to ``on_delta`` (:func:`post`)."""
    async with aclosing(stream):
        async for piece in stream:
            if on_delta is not None:
                post(on_delta, piece)
    assert stream.generation is not None
    return stream.generation


def generate(
    model: str,
    prompt: str,
    options: dict[str, Any] | None = None,
    *,
    should_stop: Callable[[], bool] | None = None,
    on_delta: Callable[[str], None] | None = None,
    messages: Messages = None,
) -> Generation:
    """Runs ``prompt`` (or ``messages``) on ``model`` and returns the whole answer; streamed
    when ``should_stop`` or ``on_delta`` is given (:mod:`.sync`). No usage record: that is
    ``gateway.services.model_call``'s."""
    endpoints = routing.endpoints_for(model)
    if should_stop is None and on_delta is None:
        return run(agenerate(endpoints, model, prompt, options, messages=messages))
    stream = GenerationStream(endpoints, model, prompt, options, messages=messages)
    return run(astream(stream, on_delta), should_stop=should_stop)


def generate_at(
    endpoint: Endpoint, model: str, prompt: str, options: dict, messages: Messages = None
) -> Generation:
    """One non-streamed call to this endpoint only: no failover, no usage record."""
    return run(agenerate_at(endpoint, model, prompt, options, messages=messages))


def list_models(endpoint: Endpoint) -> list[str]:
    """The models the runtime says it serves (a RuntimeFailure when it cannot be asked)."""
    return run(alist_models(endpoint))


def count_tokens(model: str, text: str) -> int | None:
    """The tokens of ``text`` by ``model``'s runtime tokenizer (:mod:`.tokens`), or None."""
    return run(acount_tokens_at(routing.endpoints_for(model)[0], model, text))


def post_json(
    endpoint: Endpoint, path: str, body: dict[str, Any], *, model: str, read_timeout: float
) -> Any:
    """One JSON POST to ``endpoint`` (no failover); the parsed answer."""
    return run(apost_json(endpoint, path, body, model=model, read_timeout=read_timeout))


def probe_all(endpoints: list[Endpoint], *, timeout: float) -> list[str]:
    """The state of each endpoint (:func:`.calls.aprobe`), asked all at once."""
    return run_all([aprobe(endpoint, timeout=timeout) for endpoint in endpoints])


def iter_endpoints() -> Iterator[tuple[Endpoint, list[str]]]:
    """Every configured endpoint with the models routed to it."""
    yield from routing.all_endpoints()
