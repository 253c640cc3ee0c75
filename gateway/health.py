"""What ``/readyz`` checks: the database answers, and every configured runtime is up.

It must answer within a second whatever the runtimes do: the runtimes are asked all at once
for at most READYZ_RUNTIME_TIMEOUT seconds, a runtime too busy generating to answer (it took
the connection) or answering 503 counts as up, and a good answer is trusted for
READYZ_CACHE_SECONDS, so a load balancer polling often costs the runtimes little.
"""

import time

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


def _remembered(endpoint: Endpoint) -> str | None:
    remembered = _last_up.get((endpoint.base_url, endpoint.api))
    if remembered and time.monotonic() - remembered[0] < settings.READYZ_CACHE_SECONDS:
        return remembered[1]
    return None


def _runtime_states(endpoints: list[Endpoint]) -> list[str]:
    """The state of each endpoint: remembered, else asked (those all at once)."""
    states = [_remembered(endpoint) for endpoint in endpoints]
    asking = [i for i, state in enumerate(states) if state is None]
    answers = runtime.probe_all(
        [endpoints[i] for i in asking], timeout=settings.READYZ_RUNTIME_TIMEOUT
    )
    for i, state in zip(asking, answers, strict=True):
        key = (endpoints[i].base_url, endpoints[i].api)
        if state in UP:
            _last_up[key] = (time.monotonic(), state)
        else:
            _last_up.pop(key, None)
        states[i] = state
    return [state or "" for state in states]


def readiness() -> dict[str, str]:
    """``{"database": state, "runtime:<name>": state, ...}``; ready when all are in UP."""
    checks = {"database": _database()}
    endpoints = [endpoint for endpoint, _ in runtime.iter_endpoints()]
    for endpoint, state in zip(endpoints, _runtime_states(endpoints), strict=True):
        checks[f"runtime:{endpoint.name}"] = state
    return checks


def forget() -> None:
    """Forgets the remembered answers (tests, and after a runtime changed)."""
    _last_up.clear()
