"""Token budgets of keys: prompt plus completion tokens per day or month (UTC).

A key with a ``token_budget`` has one :class:`BudgetWindow` row per period, shared by every
process. A call is admitted while the row's tokens are below the budget (one indexed read)
and adds its tokens when its usage is recorded (one ``UPDATE ... SET tokens = tokens + n``).
So a budget holds under concurrency up to the calls already admitted when it was reached:
they finish and count, and nothing is admitted after. The row is opened, the first time a
period is needed, from the usage records of that period so far (a budget set mid-period
counts what was spent before). Keys without a budget cost nothing here.
"""

import math
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.exceptions import BudgetExceeded
from gateway.models import ApiKey, BudgetPeriod, BudgetWindow, UsageRecord


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The start of the period ``now`` is in, and the start of the next (UTC)."""
    now = now.astimezone(UTC)
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == BudgetPeriod.DAY:
        return start, start + timedelta(days=1)
    start = start.replace(day=1)
    following = start.replace(year=start.year + 1, month=1) if start.month == 12 else None
    return start, following or start.replace(month=start.month + 1)


def _spent_in_records(api_key: ApiKey, start: datetime) -> int:
    tokens = Coalesce(F("prompt_tokens"), 0) + Coalesce(F("completion_tokens"), 0)
    total = UsageRecord.objects.filter(api_key=api_key, created_at__gte=start).aggregate(
        n=Coalesce(Sum(tokens), 0)
    )["n"]
    return int(total)


def _window(api_key: ApiKey, now: datetime):
    start, _ = period_bounds(api_key.budget_period, now)
    return BudgetWindow.objects.filter(
        api_key=api_key, period=api_key.budget_period, period_start=start
    ), start


def _open(api_key: ApiKey, now: datetime) -> int:
    """The period's tokens so far, opening its row from the usage records if needed."""
    windows, start = _window(api_key, now)
    tokens = windows.values_list("tokens", flat=True).first()
    if tokens is not None:
        return tokens
    spent = _spent_in_records(api_key, start)
    try:
        with transaction.atomic():
            BudgetWindow.objects.create(
                api_key=api_key, period=api_key.budget_period, period_start=start, tokens=spent
            )
    except IntegrityError:  # another process opened it just now
        return windows.values_list("tokens", flat=True).first() or spent
    return spent


def budget_check(api_key: ApiKey, *, now: datetime | None = None) -> None:
    """Raises :class:`BudgetExceeded` once the key's tokens of this period reached its
    budget (429 ``budget_exceeded`` with ``details.reset_at`` and ``Retry-After``)."""
    budget = api_key.token_budget
    if budget is None:
        return
    now = now or timezone.now()
    spent = _open(api_key, now)
    if spent < budget:
        return
    _, reset_at = period_bounds(api_key.budget_period, now)
    raise BudgetExceeded(
        budget=budget,
        period=api_key.budget_period,
        spent=spent,
        reset_at=reset_at.isoformat().replace("+00:00", "Z"),
        retry_after=max(1, math.ceil((reset_at - now).total_seconds())),
    )


def budget_add(api_key: ApiKey, tokens: int, *, now: datetime | None = None) -> None:
    """Adds a recorded call's tokens to the key's window of this period (keys with a
    budget only). A window not opened yet is opened from the records, this one included."""
    if api_key.token_budget is None or tokens <= 0:
        return
    now = now or timezone.now()
    windows, _ = _window(api_key, now)
    if not windows.update(tokens=F("tokens") + tokens):
        _open(api_key, now)


def budget_spent(api_key: ApiKey, *, now: datetime | None = None) -> int:
    """The key's tokens of its current period (from the records when no row is open)."""
    now = now or timezone.now()
    windows, start = _window(api_key, now)
    tokens = windows.values_list("tokens", flat=True).first()
    return _spent_in_records(api_key, start) if tokens is None else tokens
