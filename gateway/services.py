"""Writes of the gateway: keys, and the model call with its checks and usage record."""

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import metrics
from core.db import release_pooled_connections, retry_if_dropped
from core.errors import status_and_id
from core.exceptions import DomainError, Forbidden, InvalidApiKey, InvalidInput, ModelNotAllowed
from gateway import budgets, embeddings, keys, ratelimit, routing, rows, runtime, runtime_async
from gateway.dbthread import in_thread
from gateway.models import ApiKey, BudgetPeriod, Scope, UsageRecord

# last_used_at is written at most this often per key, so a busy key costs no write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _clean_scopes(scopes: Iterable[str]) -> list[str]:
    cleaned = sorted({s.strip() for s in scopes if s.strip()})
    unknown = set(cleaned) - set(Scope.values)
    if unknown or not cleaned:
        raise ValueError(f"scopes must be among {', '.join(Scope.values)}; got {cleaned}")
    return cleaned


@transaction.atomic
def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def api_key_create(
    *,
    name: str,
    owner: Any = None,
    scopes: Iterable[str] = (Scope.MODEL, Scope.AGENT),
    allowed_models: Iterable[str] = (),
    rate_limit_per_minute: int | None = None,
    agent_starts_per_minute: int | None = None,
    agent_reads_per_minute: int | None = None,
    max_active_jobs: int | None = None,
    token_budget: int | None = None,
    budget_period: str = BudgetPeriod.MONTH,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Creates a key and returns it with its plain text, which exists only now.

    ``owner`` defaults to a user named after ``name``, created if missing.
    """
    if owner is None:
        owner, _ = get_user_model().objects.get_or_create(username=name)
    new = keys.generate()
    api_key = ApiKey.objects.create(
        name=name,
        owner=owner,
        prefix=new.prefix,
        key_hash=new.digest,
        scopes=_clean_scopes(scopes),
        allowed_models=[m.strip() for m in allowed_models if m.strip()],
        rate_limit_per_minute=_or(rate_limit_per_minute, settings.DEFAULT_KEY_RATE_LIMIT),
        agent_starts_per_minute=_or(
            agent_starts_per_minute, settings.DEFAULT_KEY_AGENT_STARTS_PER_MINUTE
        ),
        agent_reads_per_minute=_or(
            agent_reads_per_minute, settings.DEFAULT_KEY_AGENT_READS_PER_MINUTE
        ),
        max_active_jobs=_or(max_active_jobs, settings.DEFAULT_KEY_MAX_ACTIVE_JOBS),
        token_budget=token_budget,
        budget_period=BudgetPeriod(budget_period),
        expires_at=expires_at,
    )
    return api_key, new.plain


def api_key_short_lived(*, owner: Any, name: str, minutes: int) -> ApiKey:
    """A live key of ``owner`` named ``name`` with the ``model`` scope that lasts at least
    a few more minutes: the one made earlier, else a new one that expires in ``minutes``.
    Its plain text is never shown: only the service that made it uses it (the playground)."""
    soon = timezone.now() + timedelta(minutes=5)
    found = (
        ApiKey.objects.filter(owner=owner, name=name, revoked_at__isnull=True, expires_at__gt=soon)
        .order_by("-expires_at")
        .first()
    )
    if found is not None:
        return found
    expires = timezone.now() + timedelta(minutes=minutes)
    return api_key_create(name=name, owner=owner, scopes=(Scope.MODEL,), expires_at=expires)[0]


def api_key_revoke(*, api_key: ApiKey) -> bool:
    """Revokes the key for good; False when it was revoked already."""
    now = timezone.now()
    changed = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=now)
    if changed:
        api_key.revoked_at = now
    return bool(changed)


def api_key_authenticate(plain: object) -> ApiKey:
    """The live key for ``plain``, else :class:`InvalidApiKey`.

    Reads the row on every request (no cache), so a revocation is seen by the next request
    in every process.
    """
    if not isinstance(plain, str) or not plain:
        raise InvalidApiKey()
    prefix = keys.prefix_of(plain)
    if prefix is None:
        raise InvalidApiKey()
    api_key = rows.get_by(ApiKey, "prefix", prefix)
    # The digest is compared whether the prefix exists or not, so that the time a refusal
    # takes does not tell whether a prefix exists.
    if not keys.matches(plain, api_key.key_hash if api_key else keys.UNKNOWN_DIGEST):
        raise InvalidApiKey()
    if api_key is None:
        raise InvalidApiKey()
    now = timezone.now()
    if api_key.revoked_at is not None or (api_key.expires_at and api_key.expires_at <= now):
        raise InvalidApiKey()
    if api_key.last_used_at is None or api_key.last_used_at < now - LAST_USED_RESOLUTION:
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
        # Safe to repeat: a second run finds the stamp fresh and changes nothing.
        retry_if_dropped(ApiKey.objects.filter(stale, pk=api_key.pk).update, last_used_at=now)
    return api_key


def api_key_check_live(api_key: ApiKey) -> None:
    """Raises :class:`InvalidApiKey` if the key was revoked or expired since it was read."""
    row = ApiKey.objects.filter(pk=api_key.pk).values("revoked_at", "expires_at").first()
    if (
        row is None
        or row["revoked_at"]
        or (row["expires_at"] and row["expires_at"] <= timezone.now())
    ):
        raise InvalidApiKey()


def api_key_require_scope(api_key: ApiKey, scope: str) -> None:
    # The plain value ("model"), never the enum's repr.
    name = str(Scope(scope).value)
    if name not in api_key.scopes:
        raise Forbidden(
            f'This key does not have the "{name}" scope.', details={"required_scope": name}
        )


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


def counted(
    model: str, prompt: str, messages: list[dict[str, str]] | None, generation: runtime.Generation
) -> runtime.Generation:
    """``generation`` with its token counts: the runtime's own where it reported them,
    else counted with the model's tokenizer (``runtime.count_tokens``: the prompt's text,
    or the messages' contents; the answer's text) and marked ``tokens_estimated``.
    llama-cpp-python's streams carry no counts, and some OpenAI-compatible servers none."""
    if generation.prompt_tokens is not None and generation.completion_tokens is not None:
        return generation
    sent = prompt if messages is None else "\n".join(m["content"] for m in messages)
    prompt_tokens, completion_tokens = generation.prompt_tokens, generation.completion_tokens
    if prompt_tokens is None:
        prompt_tokens = runtime.count_tokens(model, sent) if sent else 0
    if completion_tokens is None:
        completion_tokens = runtime.count_tokens(model, generation.text) if generation.text else 0
    return replace(
        generation,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tokens_estimated=(generation.prompt_tokens is None and prompt_tokens is not None)
        or (generation.completion_tokens is None and completion_tokens is not None),
    )


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
    rows.insert(
        UsageRecord(
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
        ),
        durable=not settings.USAGE_ASYNC_COMMIT,
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
    messages: list[dict[str, str]] | None = None,
) -> ModelCallResult:
    """The stateless model call shared by ``/api.php`` and the agents.

    Checks scope, model permission and the rate limit, forwards exactly ``prompt`` with
    ``model`` and ``options`` (an agent may send chat ``messages`` instead: its whole
    context for this call), and records one usage row of metadata (never text).
    ``started`` is a ``time.perf_counter()`` reading; ``elapsed`` is seconds since then.
    """
    started = time.perf_counter() if started is None else started
    _admit(api_key, model, origin, options)
    release_pooled_connections()  # none held while the model generates
    status, error, generation = 200, "", None
    try:
        generation = runtime.generate(
            model, prompt, options, should_stop=should_stop, messages=messages
        )
        generation = counted(model, prompt, messages, generation)
    except DomainError as err:
        status, error = status_and_id(err)
        raise
    except runtime.GenerationCancelled:
        status, error = 499, "cancelled"
        raise
    finally:
        elapsed = round(time.perf_counter() - started, 3)
        _record_usage(
            api_key=api_key,
            origin=origin,
            job_id=job_id,
            model=model,
            prompt_chars=_prompt_chars(prompt, messages),
            generation=generation,
            status=status,
            error=error,
            elapsed=elapsed,
        )
    return _result(model, generation, elapsed)


@dataclass(frozen=True)
class AdmittedCall:
    """A client's call (``/api.php``, ``/v1/``) that passed its checks, with the endpoints
    to try. ``messages`` (chat messages) replace ``prompt`` on the runtime's chat path."""

    api_key: ApiKey
    model: str
    prompt: str
    options: dict[str, Any] | None
    endpoints: list[routing.Endpoint]
    origin: str = UsageRecord.Origin.API
    messages: list[dict[str, str]] | None = None
    response_format: dict[str, Any] | None = None


def model_call_admit(
    *,
    api_key: ApiKey,
    model: str,
    prompt: str = "",
    options: dict[str, Any] | None = None,
    origin: str = UsageRecord.Origin.API,
    messages: list[dict[str, str]] | None = None,
    response_format: dict[str, Any] | None = None,
) -> AdmittedCall:
    """The database work of a client's call before the model: scope, model permission,
    rate limit, and the endpoints of ``model`` (the routing table is read from the
    database now and then). Synchronous: an async caller runs it in a thread."""
    _admit(api_key, model, origin, options)
    endpoints = routing.endpoints_for(model)
    return AdmittedCall(
        api_key, model, prompt, options, endpoints, origin, messages, response_format
    )


async def _record_call(
    call: AdmittedCall,
    generation: runtime.Generation | None,
    *,
    started: float,
    status: int,
    error: str,
) -> float:
    elapsed = round(time.perf_counter() - started, 3)
    await in_thread(
        _record_usage,
        api_key=call.api_key,
        origin=call.origin,
        job_id="",
        model=call.model,
        prompt_chars=_prompt_chars(call.prompt, call.messages),
        generation=generation,
        status=status,
        error=error,
        elapsed=elapsed,
    )
    return elapsed


async def _with_counts(call: AdmittedCall, generation: runtime.Generation) -> runtime.Generation:
    """:func:`counted`, in a thread (a tokenizer may load), only when the runtime left a
    count out."""
    if generation.prompt_tokens is None or generation.completion_tokens is None:
        return await in_thread(counted, call.model, call.prompt, call.messages, generation)
    return generation


async def model_call_async(call: AdmittedCall, *, started: float) -> ModelCallResult:
    """:func:`model_call` for the async views, after :func:`model_call_admit`.

    Holds no database connection while it awaits the model. If the awaiting task is
    cancelled (the client went away), the runtime call is closed and the usage row says
    ``cancelled`` (status 499).
    """
    status, error, generation = 200, "", None
    try:
        generation = await runtime_async.generate(
            call.endpoints,
            call.model,
            call.prompt,
            call.options,
            messages=call.messages,
            response_format=call.response_format,
        )
        generation = await _with_counts(call, generation)
    except DomainError as err:
        status, error = status_and_id(err)
        raise
    except asyncio.CancelledError:
        status, error = 499, "cancelled"
        raise
    finally:
        elapsed = await _record_call(call, generation, started=started, status=status, error=error)
    return _result(call.model, generation, elapsed)


async def model_call_stream(
    call: AdmittedCall, *, started: float
) -> AsyncIterator[str | ModelCallResult]:
    """The text deltas of the model's answer as the runtime sends them, after
    :func:`model_call_admit`, then, last, the :class:`ModelCallResult` (tokens, elapsed,
    finish reason). The usage row is written when the stream ends: ``cancelled`` (499) if
    the consumer closed it early or was cancelled (the client went away: the runtime call
    is closed), else the answer's status."""
    stream = runtime_async.GenerationStream(
        call.endpoints,
        call.model,
        call.prompt,
        call.options,
        messages=call.messages,
        response_format=call.response_format,
    )
    status, error = 499, "cancelled"
    try:
        async for piece in stream:
            yield piece
        assert stream.generation is not None
        stream.generation = await _with_counts(call, stream.generation)
        status, error = 200, ""
    except DomainError as err:
        status, error = status_and_id(err)
        raise
    finally:
        await stream.aclose()
        elapsed = await _record_call(
            call, stream.generation, started=started, status=status, error=error
        )
    assert stream.generation is not None
    yield _result(call.model, stream.generation, elapsed)


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


def usage_prune(*, older_than: datetime, dry_run: bool = False) -> dict[str, int]:
    """Deletes usage records from before ``older_than``, and rate-limit windows that ended."""
    usage = UsageRecord.objects.filter(created_at__lt=older_than)
    counts = {"usage_records": usage.count()}
    if not dry_run:
        with transaction.atomic():
            usage.delete()
            ratelimit.prune_windows(before=timezone.now() - timedelta(minutes=5))
    return counts
