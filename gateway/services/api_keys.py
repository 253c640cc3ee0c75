"""Writes of the gateway's keys: create, revoke, authenticate; the usage table's pruning."""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.exceptions import Forbidden, InvalidApiKey
from gateway import keys, ratelimit
from gateway.models import ApiKey, BudgetPeriod, Scope, UsageRecord

# last_used_at is written at most this often per key, so a busy key costs no write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _clean_scopes(scopes: Iterable[str]) -> list[str]:
    cleaned = sorted({s.strip() for s in scopes if s.strip()})
    unknown = set(cleaned) - set(Scope.values)
    if unknown or not cleaned:
        raise ValueError(f"scopes must be among {', '.join(Scope.values)}; got {cleaned}")
    return cleaned


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


@transaction.atomic
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
    try:
        # get(), not filter().first(): the prefix is unique, and first() would order by id.
        api_key = ApiKey.objects.get(prefix=prefix)
    except ApiKey.DoesNotExist:
        api_key = None
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
        ApiKey.objects.filter(stale, pk=api_key.pk).update(last_used_at=now)
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


def usage_prune(*, older_than: datetime, dry_run: bool = False) -> dict[str, int]:
    """Deletes usage records from before ``older_than``, and rate-limit windows that ended."""
    usage = UsageRecord.objects.filter(created_at__lt=older_than)
    counts = {"usage_records": usage.count()}
    if not dry_run:
        with transaction.atomic():
            usage.delete()
            ratelimit.prune_windows(before=timezone.now() - timedelta(minutes=5))
    return counts
