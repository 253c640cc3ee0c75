"""Which runtime endpoint serves a model.

The admin-editable ``ModelRoute`` table maps a model to one or more endpoints; a model
without a route goes to ``MODEL_RUNTIME_URL`` / ``MODEL_RUNTIME_API``. Several endpoints
for one model are used in turn, and one that failed is moved to the back for
``RUNTIME_FAILURE_COOLDOWN`` seconds. Each process keeps the table for
``RUNTIME_ROUTES_TTL`` seconds, so a change made in the admin reaches every process
within that time (and the saving process at once, through ``clear_cache``).
"""

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from gateway.options import OptionLimits


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    api: str
    limits: OptionLimits
    api_key: str = ""
    upstream_model: str = ""

    def model_name(self, model: str) -> str:
        return self.upstream_model or model


_lock = threading.Lock()
_routes: dict[str, list[Endpoint]] = {}
_loaded_at = float("-inf")
_counters: dict[str, itertools.count] = {}
_cooling: dict[str, float] = {}
# base_url -> (monotonic time read, model names the runtime lists); filled by the runtime
# client (gateway.runtime.calls.served).
served_models: dict[str, tuple[float, frozenset[str]]] = {}


def default_endpoint() -> Endpoint:
    return Endpoint(
        name="default",
        base_url=settings.MODEL_RUNTIME_URL,
        api=settings.MODEL_RUNTIME_API,
        api_key=settings.MODEL_RUNTIME_API_KEY,
        limits=OptionLimits(
            max_context=settings.RUNTIME_MAX_CONTEXT,
            max_predict=settings.RUNTIME_MAX_PREDICT,
            allowed_load_options=frozenset(settings.RUNTIME_ALLOWED_LOAD_OPTIONS),
        ),
    )


def _load() -> dict[str, list[Endpoint]]:
    from gateway.models import ModelRoute

    table: dict[str, list[Endpoint]] = {}
    rows = (
        ModelRoute.objects.filter(enabled=True, endpoint__enabled=True)
        .select_related("endpoint")
        .order_by("model", "endpoint__name")
    )
    for route in rows:
        table.setdefault(route.model, []).append(
            Endpoint(
                name=route.endpoint.name,
                base_url=route.endpoint.base_url.rstrip("/"),
                api=route.endpoint.api,
                api_key=route.endpoint.api_key,
                upstream_model=route.upstream_model,
                limits=route.endpoint.option_limits(),
            )
        )
    return table


def routes() -> dict[str, list[Endpoint]]:
    global _routes, _loaded_at
    now = time.monotonic()
    if now - _loaded_at > settings.RUNTIME_ROUTES_TTL:
        table = _load()
        with _lock:
            _routes, _loaded_at = table, now
    return _routes


def clear_cache() -> None:
    global _loaded_at
    with _lock:
        _loaded_at = float("-inf")
        _cooling.clear()
        served_models.clear()


def option_errors(model: str, options: dict[str, Any] | None) -> dict[str, list[str]]:
    """``{name: [message]}`` for each option outside the limits of an endpoint that may
    serve ``model`` (a call may fail over to any of them)."""
    errors: dict[str, list[str]] = {}
    for endpoint in routes().get(model) or [default_endpoint()]:
        for name, messages in endpoint.limits.errors(options or {}).items():
            errors.setdefault(name, messages)
    return errors


def endpoints_for(model: str) -> list[Endpoint]:
    """The endpoints to try for ``model``, in order: the next in turn first, cooling last."""
    candidates = routes().get(model)
    if not candidates:
        return [default_endpoint()]
    with _lock:
        turn = next(_counters.setdefault(model, itertools.count()))
    start = turn % len(candidates)
    ordered = candidates[start:] + candidates[:start]
    now = time.monotonic()
    return sorted(ordered, key=lambda ep: _cooling.get(ep.base_url, 0.0) > now)


def mark_failed(endpoint: Endpoint) -> None:
    with _lock:
        _cooling[endpoint.base_url] = time.monotonic() + settings.RUNTIME_FAILURE_COOLDOWN


def all_endpoints() -> list[tuple[Endpoint, list[str]]]:
    """Every configured endpoint with the models routed to it (for check_runtime)."""
    by_url: dict[tuple[str, str], tuple[Endpoint, list[str]]] = {}
    for model, endpoints in _load().items():
        for ep in endpoints:
            key = (ep.base_url, ep.api)
            by_url.setdefault(key, (ep, []))[1].append(model)
    default = default_endpoint()
    by_url.setdefault((default.base_url, default.api), (default, []))
    return list(by_url.values())
