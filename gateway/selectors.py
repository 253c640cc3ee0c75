"""Reads of the gateway: usage reports and the keys' budgets."""

from datetime import datetime
from typing import Any

from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from gateway import budgets
from gateway.models import ApiKey, BudgetPeriod, BudgetWindow, UsageRecord

REPORT_GROUPS = ("key", "model", "day")
_GROUP_FIELDS = {
    "key": ("api_key_id", "api_key__name", "api_key__prefix"),
    "model": ("model",),
    "day": ("day",),
}
# A call ended by its client (499, a cancelled job) is not an error of the service.
_ERROR = Q(status__gte=400) & ~Q(status=499)


def usage_report(*, since: datetime, by: str = "key") -> list[dict[str, Any]]:
    """Calls, errors and tokens since ``since``, one row per key, model or day (UTC), the
    biggest spender first (days in order). One grouped query."""
    records = UsageRecord.objects.filter(created_at__gte=since)
    if by == "day":
        records = records.annotate(day=TruncDate("created_at"))
    rows = (
        records.values(*_GROUP_FIELDS[by])
        .annotate(
            calls=Count("id"),
            errors=Count("id", filter=_ERROR),
            prompt_tokens=Coalesce(Sum("prompt_tokens"), 0),
            completion_tokens=Coalesce(Sum("completion_tokens"), 0),
        )
        .annotate(tokens=F("prompt_tokens") + F("completion_tokens"))
        .order_by(*(("day",) if by == "day" else ("-tokens", "-calls", *_GROUP_FIELDS[by])))
    )
    report = []
    for row in rows:
        if by == "key":
            group = {"key": f"{row['api_key__name']} (llmgw_{row['api_key__prefix']})"}
        elif by == "day":
            group = {"day": row["day"].isoformat()}
        else:
            group = {"model": row["model"]}
        report.append(
            {
                **group,
                **{
                    name: row[name]
                    for name in ("calls", "errors", "prompt_tokens", "completion_tokens", "tokens")
                },
            }
        )
    return report


def budgets_now(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every live key with a budget: its spend this period against the budget, the
    fullest first. Two queries, whatever the number of keys."""
    now = now or timezone.now()
    keys = list(
        ApiKey.objects.filter(token_budget__isnull=False, revoked_at__isnull=True).order_by("name")
    )
    starts = {period: budgets.period_bounds(period, now) for period in BudgetPeriod.values}
    windows = {
        (w.api_key_id, w.period, w.period_start): w.tokens
        for w in BudgetWindow.objects.filter(
            api_key__in=keys,
            period_start__in=[start for start, _ in starts.values()],
        )
    }
    rows = []
    for key in keys:
        start, reset_at = starts[key.budget_period]
        spent = windows.get((key.pk, key.budget_period, start))
        if spent is None:  # no call of this period yet opened its window
            spent = budgets.budget_spent(key, now=now)
        rows.append(
            {
                "id": key.pk,
                "name": f"{key.name} ({key.prefix})",
                "period": key.budget_period,
                "budget": key.token_budget,
                "spent": spent,
                "percent": round(100 * spent / key.token_budget, 1) if key.token_budget else 100.0,
                "reset_at": reset_at,
            }
        )
    return sorted(rows, key=lambda row: -row["percent"])
