"""Writes of the gateway: keys, and the model call with its checks and usage record."""

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

from gateway import keys, ratelimit, rows, runtime
from gateway.errors import ApiError
from gateway.models import ApiKey, Scope, UsageRecord

# last_used_at is written at most this often per key, so a busy key costs no write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def invalid_api_key() -> ApiError:
    return ApiError(401, "invalid_api_key", "The API key is missing, unknown, revoked or expired.")


def _clean_scopes(scopes: Iterable[str]) -> list[str]:
    cleaned = sorted({s.strip() for s in scopes if s.strip()})
    unknown = set(cleaned) - set(Scope.values)
    if unknown or not cleaned:
        raise ValueError(f"scopes must be among {', '.join(Scope.values)}; got {cleaned}")
    return cleaned


@transaction.atomic
def api_key_create(
    *,
    name: str,
    owner: Any = None,
    scopes: Iterable[str] = (Scope.MODEL, Scope.AGENT),
    allowed_models: Iterable[str] = (),
    rate_limit_per_minute: int | None = None,
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
        rate_limit_per_minute=(
            settings.DEFAULT_KEY_RATE_LIMIT
            if rate_limit_per_minute is None
            else rate_limit_per_minute
        ),
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
    """The live key for ``plain``, else 401 ``invalid_api_key``.

    Reads the row on every request (no cache), so a revocation is seen by the next request
    in every process.
    """
    if not isinstance(plain, str) or not plain:
        raise invalid_api_key()
    prefix = keys.prefix_of(plain)
    if prefix is None:
        raise invalid_api_key()
    api_key = rows.get_by(ApiKey, "prefix", prefix)
    if api_key is None:
        raise invalid_api_key()
    if not keys.matches(plain, api_key.key_hash):
        raise invalid_api_key()
    now = timezone.now()
    if api_key.revoked_at is not None or (api_key.expires_at and api_key.expires_at <= now):
        raise invalid_api_key()
    if api_key.last_used_at is None or api_key.last_used_at < now - LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
        ).update(last_used_at=now)
    return api_key


def api_key_check_live(api_key: ApiKey) -> None:
    """401 ``invalid_api_key`` if the key was revoked or expired since it was read."""
    row = ApiKey.objects.filter(pk=api_key.pk).values("revoked_at", "expires_at").first()
    if (
        row is None
        or row["revoked_at"]
        or (row["expires_at"] and row["expires_at"] <= timezone.now())
    ):
        raise invalid_api_key()


def api_key_require_scope(api_key: ApiKey, scope: str) -> None:
    if scope not in api_key.scopes:
        raise ApiError(
            403,
            "forbidden",
            f"This key does not have the {scope!r} scope.",
            details={"required_scope": scope},
        )


def _require_model(api_key: ApiKey, model: str) -> None:
    if api_key.allowed_models and model not in api_key.allowed_models:
        raise ApiError(
            403,
            "model_not_allowed",
            f"This key may not use the model {model!r}.",
            details={"model": model},
        )


@dataclass
class ModelCallResult:
    model: str
    response: str
    elapsed: float
    prompt_tokens: int | None
    completion_tokens: int | None


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
) -> ModelCallResult:
    """The stateless model call shared by ``/api.php`` and the agents.

    Checks scope, model permission and the rate limit, forwards exactly ``prompt`` with
    ``model`` and ``options``, and records one usage row of metadata (never text).
    ``started`` is a ``time.perf_counter()`` reading; ``elapsed`` is seconds since then.
    """
    started = time.perf_counter() if started is None else started
    api_key_require_scope(api_key, Scope.MODEL if origin == UsageRecord.Origin.API else Scope.AGENT)
    _require_model(api_key, model)
    ratelimit.take_slot(api_key)
    status, error, generation = 200, "", None
    try:
        generation = runtime.generate(model, prompt, options, should_stop=should_stop)
    except ApiError as err:
        status, error = err.status, err.error
        raise
    except runtime.GenerationCancelled:
        status, error = 499, "cancelled"
        raise
    finally:
        elapsed = round(time.perf_counter() - started, 3)
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
                prompt_chars=len(prompt),
                response_chars=len(generation.text) if generation else 0,
                prompt_tokens=generation.prompt_tokens if generation else None,
                completion_tokens=generation.completion_tokens if generation else None,
            ),
            durable=not settings.USAGE_ASYNC_COMMIT,
        )
    return ModelCallResult(
        model=model,
        response=generation.text,
        elapsed=elapsed,
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
    )
