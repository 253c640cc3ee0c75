"""Typed readers for settings that come from the environment.

Each helper raises ``ImproperlyConfigured`` on a malformed value, so that a typo in a
deployment stops the process at start instead of surfacing as odd behaviour later.
"""

import ipaddress
import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """The variable's value; an empty value counts as unset (as in ``.env.example``)."""
    return os.environ.get(name) or default


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_list(
    name: str, default: list[str] | None = None, *, choices: tuple[str, ...] | None = None
) -> list[str]:
    """Comma-separated values; with ``choices``, each must be one of them."""
    raw = os.environ.get(name)
    if not raw:
        return list(default or [])
    values = [item.strip() for item in raw.split(",") if item.strip()]
    if choices is not None and not set(values) <= set(choices):
        raise ImproperlyConfigured(f"{name} may name only: {', '.join(choices)}.")
    return values


def env_seconds_list(name: str, default: str) -> list[float]:
    """Comma-separated non-negative numbers of seconds, at least one."""
    raw = (os.environ.get(name) or default).strip()
    try:
        values = [float(part) for part in raw.split(",")]
    except ValueError:
        raise ImproperlyConfigured(
            f"{name} must be comma-separated numbers of seconds, got {raw!r}"
        ) from None
    if any(not 0 <= value < float("inf") for value in values):
        raise ImproperlyConfigured(f"{name} must list finite numbers of 0 or more, got {raw!r}")
    return values


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (os.environ.get(name) or default).strip()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_networks(
    name: str, default: list[str]
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Comma-separated networks in CIDR notation (a bare address is a network of one)."""
    try:
        return tuple(
            ipaddress.ip_network(network, strict=False) for network in env_list(name, default)
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


def env_secret_key(name: str, path: Path) -> str:
    """The variable's value, else a key generated once and kept in the file ``path``
    (mode 0600), so that one machine keeps its key across restarts."""
    key = env_str(name)
    if key:
        return key
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


def env_database(name: str, default: str) -> dict[str, Any]:
    """``DATABASES["default"]`` from the URL in the variable: SQLite or PostgreSQL.

    SQLite: WAL so readers never block the writer, IMMEDIATE transactions so a writer takes
    the lock up front instead of failing on upgrade, and a busy timeout so concurrent
    writers wait instead of raising "database is locked"; one connection kept per thread.
    PostgreSQL: a pool per process (psycopg_pool) of at most ``DB_POOL_MAX_SIZE``
    connections, each checked before a request uses it (``DB_CONN_HEALTH_CHECKS``);
    ``DB_POOL_MAX_SIZE=0``: no pool, one connection per thread kept ``DB_CONN_MAX_AGE``.
    """
    try:
        db = dj_database_url.parse(env_str(name, default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not a valid database URL: {exc}") from None
    if db["ENGINE"] == "django.db.backends.sqlite3":
        db["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": env_float("SQLITE_BUSY_TIMEOUT", 20.0, minimum=0),
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
            ),
        }
        db["CONN_MAX_AGE"] = None
    elif db["ENGINE"] == "django.db.backends.postgresql":
        pool_max = env_int("DB_POOL_MAX_SIZE", 8, minimum=0)
        db["CONN_HEALTH_CHECKS"] = env_bool("DB_CONN_HEALTH_CHECKS", True)
        if pool_max:
            db["CONN_MAX_AGE"] = 0  # a closed connection goes back to the pool
            db.setdefault("OPTIONS", {})["pool"] = {
                "min_size": min(env_int("DB_POOL_MIN_SIZE", 1, minimum=0), pool_max),
                "max_size": pool_max,
                "timeout": env_float("DB_POOL_TIMEOUT", 10.0, minimum=0.1),
            }
        else:
            db["CONN_MAX_AGE"] = env_int("DB_CONN_MAX_AGE", 600, minimum=0)
    else:
        raise ImproperlyConfigured(f"{name} must be a sqlite:// or postgres:// URL")
    db["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME") or None}
    return db


def asynchronous_commit(db: dict[str, Any]) -> dict[str, Any]:
    """A PostgreSQL ``DATABASES`` entry like ``db`` whose connections commit without waiting
    for the disk flush (``synchronous_commit=off``, set by the server when they connect:
    libpq's ``options``, so no statement of its own). A pool of its own, checked as
    ``db``'s; in tests the same database as ``db`` (a test mirror of ``default``)."""
    options = dict(db.get("OPTIONS", {}))
    options["options"] = f"{options.get('options', '')} -c synchronous_commit=off".strip()
    return {**db, "OPTIONS": options, "TEST": {"MIRROR": "default"}}
