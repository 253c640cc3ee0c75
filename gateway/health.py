"""What ``/readyz`` checks: the database answers, and every configured runtime is up.

It must answer within a second whatever the runtimes do: each runtime is asked in parallel
for at most READYZ_RUNTIME_TIMEOUT seconds, a runtime too busy generating to answer (it took
the connection) or answering 503 counts as up, and a good answer is trusted for
READYZ_CACHE_SECONDS, so a load balancer polling often costs the runtimes little.
"""

import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection

from gateway import runtime
from gateway.routing import Endpoint

UP = frozenset({"ok", "busy"})

# (base_url, api) -> (monotonic time, state) of the last answer that meant "up".
_last_up: dict[tuple[str, str], tuple[float, str]] = {}


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any failure means not ready
        return f"error: {type(exc).__name__}"
    return "ok"


def _runtime_state(endpoint: Endpoint) -> str:
    key = (endpoint.base_url, endpoint.api)
    remembered = _last_up.get(key)
    if remembered and time.monotonic() - remembered[0] < settings.READYZ_CACHE_SECONDS:
        return remembered[1]
    state = runtime.probe(endpoint, timeout=settings.READYZ_RUNTIME_TIMEOUT)
    if state in UP:
        _last_up[key] = (time.monotonic(), state)
    else:
        _last_up.pop(key, None)
    return state


def readiness() -> dict[str, str]:
    """``{"database": state, "runtime:<name>": state, ...}``; ready when all are in UP."""
    checks = {"database": _database()}
    endpoints = [endpoint for endpoint, _ in runtime.iter_endpoints()]
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(endpoints)))) as pool:
        states = list(pool.map(_runtime_state, endpoints))
    for endpoint, state in zip(endpoints, states, strict=True):
        checks[f"runtime:{endpoint.name}"] = state
    return checks


def forget() -> None:
    """Forgets the remembered answers (tests, and after a runtime changed)."""
    _last_up.clear()
