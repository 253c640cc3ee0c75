"""Per-key requests-per-minute limit, shared by every process through the database.

A fixed one-minute window per key. Taking a slot is one conditional
``UPDATE ... SET count = count + 1 WHERE count < limit``; only the first request of a
window inserts the row. No read-modify-write, so concurrent processes never over-admit.
"""

import math
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from core.db import retry_if_dropped
from core.exceptions import RateLimited
from gateway.models import ApiKey, RateLimitWindow

WINDOW = timedelta(minutes=1)


def _window_start(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0)


def take_slot(api_key: ApiKey, *, now: datetime | None = None) -> None:
    """Counts one request of ``api_key``; raises :class:`RateLimited`
    when the window is full."""
    limit = api_key.rate_limit_per_minute
    if not limit:
        return
    now = now or timezone.now()
    start = _window_start(now)
    windows = RateLimitWindow.objects.filter(api_key=api_key, window_start=start)
    # Met on a connection the server dropped, the update is sent again on a new one (an
    # update cut after the server ran it counts one request twice: on the safe side).
    if retry_if_dropped(windows.filter(count__lt=limit).update, count=F("count") + 1):
        return
    try:
        with transaction.atomic():
            RateLimitWindow.objects.create(api_key=api_key, window_start=start, count=1)
        return
    except IntegrityError:
        # The window exists: either it is full, or another request created it just now.
        if windows.filter(count__lt=limit).update(count=F("count") + 1):
            return
    retry_after = max(1, math.ceil((start + WINDOW - now).total_seconds()))
    raise RateLimited(limit=limit, retry_after=retry_after)


def prune_windows(*, before: datetime) -> int:
    deleted, _ = RateLimitWindow.objects.filter(window_start__lt=before).delete()
    return deleted
