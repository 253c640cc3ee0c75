"""The model call: its checks, the runtime call and its usage record, for every face
(``/api.php``, ``/v1/``, the agents, the playground); and the embedding call of ``/v1/``."""

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.conf import settings

from core import metrics
from core.db import release_pooled_connections
from core.errors import status_and_id
from core.exceptions import DomainError, InvalidInput, ModelNotAllowed
from gateway import budgets, embeddings, ratelimit, routing, runtime
from gateway.dbthread import in_thread
from gateway.models import ApiKey, Scope, UsageRecord
from gateway.services.api_keys import api_key_require_scope


def _require_model(api_key: ApiKey, model: str) -> None:
    if api_key.allowed_models and model not in api_key.allowed_models:
        raise ModelNotAllowed(model)


# The faces a client calls the model through (``/api.php``, ``/v1/``): the key's ``model``
# scope and its rate limit apply.
CLIENT_ORIGINS = frozenset({UsageRecord.Origin.API, UsageRecord.Origin.OPENAI})


@dataclass
class ModelCallResult:
    model: str
    response: str
    elapsed: float
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str = "stop"
    tokens_estimated: bool = False


def _admit(api_key: ApiKey, model: str, origin: str, options: dict[str, Any] | None = None) -> None:
    """The checks before the runtime: scope, model permission, the options within the
    limits of the model's endpoints, then the rate limit (of a client's call: an agent's
    calls were paid for by the request that started its job)."""
    clients = origin in CLIENT_ORIGINS
    api_key_require_scope(api_key, Scope.MODEL if clients else Scope.AGENT)
    _require_model(api_key, model)
    errors = routing.option_errors(model, options)
    if errors:
        raise InvalidInput({f"options.{name}": messages for name, messages in errors.items()})
    if clients:  # an agent's own calls: its job was counted
        ratelimit.take_slot(api_key)
    budgets.budget_check(api_key)  # every face and the agents' calls alike


@dataclass(frozen=True)
class AdmittedCall:
    """A model call that passed its checks, with the endpoints to try. ``messages`` (chat
    messages) replace ``prompt`` on the runtime's chat path."""

    api_key: ApiKey
    model: str
    prompt: str
    options: dict[str, Any] | None
    endpoints: list[routing.Endpoint]
    origin: str = UsageRecord.Origin.API
    messages: list[dict[str, str]] | None = None
    response_format: dict[str, Any] | None = None
    job_id: str = ""


def model_call_admit(
    *,
    api_key: ApiKey,
    model: str,
    prompt: str = "",
    options: dict[str, Any] | None = None,
    origin: str = UsageRecord.Origin.API,
    messages: list[dict[str, str]] | None = None,
    response_format: dict[str, Any] | None = None,
    job_id: str = "",
) -> AdmittedCall:
    """The database work of a call before the model: scope, model permission, options,
    rate limit, budget, and the endpoints of ``model`` (the routing table is read from the
    database now and then). Synchronous: an async caller runs it in a thread."""
    _admit(api_key, model, origin, options)
    endpoints = routing.endpoints_for(model)
    return AdmittedCall(
        api_key, model, prompt, options, endpoints, origin, messages, response_format, job_id
    )


def model_call(
    *,
    api_key: ApiKey,
    model: str,
    prompt: str,
    options: dict[str, Any] | None = None,
    started: float | None = None,
    origin: str = UsageRecord.Origin.API,
    job_id: str = "",
    should_stop: Callable[[], bool] | None = None,
    on_delta: Callable[[str], None] | None = None,
    messages: list[dict[str, str]] | None = None,
) -> ModelCallResult:
    """The model call of synchronous code (the agents, the playground): admits it, then
    runs :func:`model_call_stream` on the runtime client's loop (``gateway.runtime``).

    With ``on_delta`` or ``should_stop`` the answer is streamed: ``on_delta(text)`` is
    called in this thread with each delta as it arrives, and the call raises
    ``runtime.GenerationCancelled`` soon after ``should_stop()`` is true (the runtime call
    closed, the usage row ``cancelled``). ``started`` is a ``time.perf_counter()`` reading;
    ``elapsed`` is seconds since then.
    """
    started = time.perf_counter() if started is None else started
    call = model_call_admit(
        api_key=api_key,
        model=model,
        prompt=prompt,
        options=options,
        origin=origin,
        messages=messages,
        job_id=job_id,
    )
    release_pooled_connections()  # none held while the model generates
    streamed = should_stop is not None or on_delta is not None
    answer = model_call_async(call, started=started, stream=streamed, on_delta=on_delta)
    return runtime.run(answer, should_stop=should_stop)


async def model_call_async(
    call: AdmittedCall,
    *,
    started: float,
    stream: bool = False,
    on_delta: Callable[[str], None] | None = None,
) -> ModelCallResult:
    """:func:`model_call_stream` read to its result, each delta given to ``on_delta``."""
    async with aclosing(model_call_stream(call, started=started, stream=stream)) as items:
        async for item in items:
            if isinstance(item, ModelCallResult):
                return item
            if on_delta is not None:
                runtime.post(on_delta, item)
    raise AssertionError("a model call ends with its result")


async def model_call_stream(
    call: AdmittedCall, *, started: float, stream: bool = True
) -> AsyncIterator[str | ModelCallResult]:
    """The one model call, after :func:`model_call_admit`: the text deltas of the answer as
    the runtime sends them (none when not ``stream``), then, last, the
    :class:`ModelCallResult` (tokens, elapsed, finish reason).

    Forwards exactly the prompt (or the messages) with the model and options, and writes
    one usage row of metadata (never text) when the call ends: ``cancelled`` (499) if the
    consumer closed the stream early or was cancelled (a client gone, a job's cancel: the
    runtime call is closed), else the answer's status. Holds no database connection while
    it awaits the model (``runtime.blocking``).
    """
    status, error, generation = 499, "cancelled", None
    try:
        what = (call.endpoints, call.model, call.prompt, call.options)
        chat = {"messages": call.messages, "response_format": call.response_format}
        if stream:
            pieces = runtime.GenerationStream(*what, **chat)
            async with aclosing(pieces):
                async for piece in pieces:
                    yield piece
            generation = pieces.generation
        else:
            generation = await runtime.agenerate(*what, **chat)
        assert generation is not None
        generation = await counted(call, generation)
        status, error = 200, ""
    except DomainError as err:
        status, error = status_and_id(err)
        raise
    finally:
        elapsed = round(time.perf_counter() - started, 3)
        await runtime.blocking(
            _record_usage,
            api_key=call.api_key,
            origin=call.origin,
            job_id=call.job_id,
            model=call.model,
            prompt_chars=_prompt_chars(call.prompt, call.messages),
            generation=generation,
            status=status,
            error=error,
            elapsed=elapsed,
        )
    yield _result(call.model, generation, elapsed)


async def counted(call: AdmittedCall, generation: runtime.Generation) -> runtime.Generation:
    """``generation`` with its token counts: the runtime's own where it reported them,
    else counted with the tokenizer of the runtime that answered (the prompt's text, or
    the messages' contents; the answer's text) and marked ``tokens_estimated``.
    llama-cpp-python's streams carry no counts, and some OpenAI-compatible servers none."""
    if generation.prompt_tokens is not None and generation.completion_tokens is not None:
        return generation
    sent = _sent_text(call.prompt, call.messages)

    async def count(text: str) -> int | None:
        return await runtime.acount_tokens_at(generation.endpoint, call.model, text) if text else 0

    prompt_tokens, completion_tokens = generation.prompt_tokens, generation.completion_tokens
    if prompt_tokens is None:
        prompt_tokens = await count(sent)
    if completion_tokens is None:
        completion_tokens = await count(generation.text)
    return replace(
        generation,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tokens_estimated=(generation.prompt_tokens is None and prompt_tokens is not None)
        or (generation.completion_tokens is None and completion_tokens is not None),
    )


def _sent_text(prompt: str, messages: list[dict[str, str]] | None) -> str:
    return prompt if messages is None else "\n".join(m["content"] for m in messages)


def _record_usage(
    *,
    api_key: ApiKey,
    origin: str,
    job_id: str,
    model: str,
    prompt_chars: int,
    generation: runtime.Generation | None,
    status: int,
    error: str,
    elapsed: float,
    prompt_tokens: int | None = None,
) -> None:
    """The one usage row of a call: metadata, never the prompt or the answer (the tokens
    read are the generation's, else ``prompt_tokens``: an embedding's)."""
    used_prompt = generation.prompt_tokens if generation else prompt_tokens
    used_completion = generation.completion_tokens if generation else None
    metrics.observe_tokens(model, used_prompt, used_completion)
    budgets.budget_add(api_key, (used_prompt or 0) + (used_completion or 0))
    UsageRecord.objects.using(settings.USAGE_DATABASE).create(
        api_key=api_key,
        origin=origin,
        job_id=job_id,
        model=model,
        endpoint=generation.endpoint.name if generation else "",
        status=status,
        error=error,
        elapsed=elapsed,
        prompt_chars=prompt_chars,
        response_chars=len(generation.text) if generation else 0,
        prompt_tokens=used_prompt,
        completion_tokens=used_completion,
        tokens_estimated=generation.tokens_estimated if generation else False,
    )


def _result(model: str, generation: runtime.Generation, elapsed: float) -> ModelCallResult:
    return ModelCallResult(
        model=model,
        response=generation.text,
        elapsed=elapsed,
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        finish_reason=generation.finish_reason,
        tokens_estimated=generation.tokens_estimated,
    )


def _prompt_chars(prompt: str, messages: list[dict[str, str]] | None) -> int:
    return len(prompt) if messages is None else sum(len(m["content"]) for m in messages)


async def embedding_call_async(
    *, api_key: ApiKey, model: str, texts: list[str], started: float
) -> tuple[np.ndarray, int]:
    """The vectors of ``texts`` for a client of ``/v1/embeddings`` and the tokens read,
    after the same checks as a model call (scope, model permission, rate limit), with one
    usage row. The model runs in a worker thread, not the request's."""
    await in_thread(_admit, api_key, model, UsageRecord.Origin.OPENAI)
    status, error, tokens = 200, "", None
    try:
        vectors, tokens = await asyncio.to_thread(embeddings.embed_with, model, texts)
    except DomainError as err:
        status, error = status_and_id(err)
        raise
    except asyncio.CancelledError:
        status, error = 499, "cancelled"
        raise
    finally:
        await in_thread(
            _record_usage,
            api_key=api_key,
            origin=UsageRecord.Origin.OPENAI,
            job_id="",
            model=model,
            prompt_chars=sum(map(len, texts)),
            generation=None,
            status=status,
            error=error,
            elapsed=round(time.perf_counter() - started, 3),
            prompt_tokens=tokens,
        )
    return vectors, tokens
