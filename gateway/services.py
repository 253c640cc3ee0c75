"""Writes of the gateway: keys, and the model call with its checks and usage record."""

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.db import release_pooled_connections, retry_if_dropped
from core.errors import status_and_id
from core.exceptions import DomainError, Forbidden, InvalidApiKey, InvalidInput, ModelNotAllowed
from gateway import keys, ratelimit, routing, rows, runtime, runtime_async
from gateway.dbthread import in_thread
from gateway.models import ApiKey, Scope, UsageRecord

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
        expires_at=expires_at,
    )
    return api_key, new.plain


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


@dataclass
class ModelCallResult:
    model: str
    response: str
    elapsed: float
    prompt_tokens: int | None
    completion_tokens: int | None


def _admit(api_key: ApiKey, model: str, origin: str, options: dict[str, Any] | None = None) -> None:
    """The checks before the runtime: scope, model permission, the options within the
    limits of the model's endpoints, then the rate limit (of a client's call: an agent's
    calls were paid for by the request that started its job)."""
    api_key_require_scope(api_key, Scope.MODEL if origin == UsageRecord.Origin.API else Scope.AGENT)
    _require_model(api_key, model)
    errors = routing.option_errors(model, options)
    if errors:
        raise InvalidInput({f"options.{name}": messages for name, messages in errors.items()})
    if origin == UsageRecord.Origin.API:  # an agent's own calls: its job was counted
        ratelimit.take_slot(api_key)


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
) -> None:
    """The one usage row of a call: metadata, never the prompt or the answer."""
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
            prompt_tokens=generation.prompt_tokens if generation else None,
            completion_tokens=generation.completion_tokens if generation else None,
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
            prompt_chars=(
                len(prompt) if messages is None else sum(len(m["content"]) for m in messages)
            ),
            generation=generation,
            status=status,
            error=error,
            elapsed=elapsed,
        )
    return _result(model, generation, elapsed)


@dataclass(frozen=True)
class AdmittedCall:
    """A call of ``/api.php`` that passed its checks, with the endpoints to try."""

    api_key: ApiKey
    model: str
    prompt: str
    options: dict[str, Any] | None
    endpoints: list[routing.Endpoint]


def model_call_admit(
    *, api_key: ApiKey, model: str, prompt: str, options: dict[str, Any] | None = None
) -> AdmittedCall:
    """The database work of an ``/api.php`` call before the model: scope, model permission,
    rate limit, and the endpoints of ``model`` (the routing table is read from the
    database now and then). Synchronous: an async caller runs it in a thread."""
    _admit(api_key, model, UsageRecord.Origin.API, options)
    return AdmittedCall(api_key, model, prompt, options, routing.endpoints_for(model))


async def model_call_async(call: AdmittedCall, *, started: float) -> ModelCallResult:
    """:func:`model_call` for ``/api.php``'s async view, after :func:`model_call_admit`.

    Holds no database connection while it awaits the model. If the awaiting task is
    cancelled (the client went away), the runtime call is closed and the usage row says
    ``cancelled`` (status 499).
    """
    status, error, generation = 200, "", None
    try:
        generation = await runtime_async.generate(
            call.endpoints, call.model, call.prompt, call.options
        )
    except DomainError as err:
        status, error = status_and_id(err)
        raise
    except asyncio.CancelledError:
        status, error = 499, "cancelled"
        raise
    finally:
        elapsed = round(time.perf_counter() - started, 3)
        await in_thread(
            _record_usage,
            api_key=call.api_key,
            origin=UsageRecord.Origin.API,
            job_id="",
            model=call.model,
            prompt_chars=len(call.prompt),
            generation=generation,
            status=status,
            error=error,
            elapsed=elapsed,
        )
    return _result(call.model, generation, elapsed)


def usage_prune(*, older_than: datetime, dry_run: bool = False) -> dict[str, int]:
    """Deletes usage records from before ``older_than``, and rate-limit windows that ended."""
    usage = UsageRecord.objects.filter(created_at__lt=older_than)
    counts = {"usage_records": usage.count()}
    if not dry_run:
        with transaction.atomic():
            usage.delete()
            ratelimit.prune_windows(before=timezone.now() - timedelta(minutes=5))
    return counts
