"""Per-key requests-per-minute limits, shared by every process through the database.

A fixed one-minute window per key and bucket: model calls (``rate_limit_per_minute``), and
the agent API's writes and reads, counted apart (``agent_starts_per_minute``,
``agent_reads_per_minute``; :class:`AgentRateLimit`). Taking a slot is one conditional
``UPDATE ... SET count = count + 1 WHERE count < limit``; only the first request of a
window inserts the row. No read-modify-write, so concurrent processes never over-admit.
"""

import math
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.throttling import BaseThrottle

from core import metrics
from core.exceptions import RateLimited
from gateway.models import ApiKey, RateLimitWindow

Bucket = RateLimitWindow.Bucket

WINDOW = timedelta(minutes=1)


def _window_start(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0)


def take_slot(
    api_key: ApiKey,
    *,
    bucket: str = Bucket.MODEL,
    limit: int | None = None,
    now: datetime | None = None,
) -> None:
    """Counts one request of ``api_key`` in ``bucket``; raises :class:`RateLimited`
    when the window is full. ``limit`` defaults to the key's model-call limit."""
    limit = api_key.rate_limit_per_minute if limit is None else limit
    if not limit:
        return
    now = now or timezone.now()
    start = _window_start(now)
    windows = RateLimitWindow.objects.filter(api_key=api_key, bucket=bucket, window_start=start)
    if windows.filter(count__lt=limit).update(count=F("count") + 1):
        return
    try:
        with transaction.atomic():
            RateLimitWindow.objects.create(
                api_key=api_key, bucket=bucket, window_start=start, count=1
            )
        return
    except IntegrityError:
        # The window exists: either it is full, or another request created it just now.
        if windows.filter(count__lt=limit).update(count=F("count") + 1):
            return
    retry_after = max(1, math.ceil((start + WINDOW - now).total_seconds()))
    metrics.RATE_LIMITED.inc()
    raise RateLimited(limit=limit, retry_after=retry_after)


def prune_windows(*, before: datetime) -> int:
    deleted, _ = RateLimitWindow.objects.filter(window_start__lt=before).delete()
    return deleted


class AgentRateLimit(BaseThrottle):
    """The agent API's per-key limits, checked after the key and its scope: a POST counts
    against ``agent_starts_per_minute``, anything else against ``agent_reads_per_minute``.
    Over the limit: :class:`RateLimited` (429 ``rate_limited`` with ``Retry-After``)."""

    def allow_request(self, request, view) -> bool:
        api_key = request.auth
        if request.method == "POST":
            take_slot(api_key, bucket=Bucket.AGENT_START, limit=api_key.agent_starts_per_minute)
        else:
            take_slot(api_key, bucket=Bucket.AGENT_READ, limit=api_key.agent_reads_per_minute)
        return True
