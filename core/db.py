"""Database connections that the server dropped: noticed, replaced, and the work done once more.

A database restart, a failover or ``pg_terminate_backend`` cuts every connection at once.

- Idle in a pool: the pool checks each connection it hands out (``CONN_HEALTH_CHECKS``)
  and a thread per process checks its idle ones every ``DB_POOL_CHECK_SECONDS``
  (:func:`check_pools_now_and_then`): psycopg_pool waits 1, 2, 4 ... s between two dead
  ones of one request, so meeting all of a pool's one by one would hold the request for its
  whole pool timeout.
- Held by a request while cut: the request's database work runs again on a new
  connection (:func:`run_again_if_dropped`, at the entry points: ``gateway.dbthread`` for the
  async views, ``agents.api.AgentAPIView`` for the agent API), when it is safe to: outside a
  transaction, and only for a lost connection, never for errors of a statement itself.
- Cut at a commit: the outcome is unknown; :func:`run_again_if_dropped_at_commit` settles
  it for the services that start work.
- Out of reach: :func:`is_database_unavailable` makes it a 503 (``core.errors``).
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def watch_pools() -> None:
    """At start-up (``CoreConfig.ready``), when the database has a pool: its idle connections
    checked now and then, and no pool inherited across a fork."""
    if any(connections.settings[alias].get("OPTIONS", {}).get("pool") for alias in connections):
        connection_created.connect(check_pools_now_and_then)
        os.register_at_fork(before=close_pools)


def pool_max_size(alias: str) -> int | None:
    """The most connections the pool of the database ``alias`` holds (psycopg_pool's
    default, 4, for ``"pool": True``); None when it has no pool."""
    pool = connections.settings[alias].get("OPTIONS", {}).get("pool")
    if not pool:
        return None
    return pool.get("max_size", pool.get("min_size", 4)) if isinstance(pool, dict) else 4


def check_pools_now_and_then(sender=None, connection=None, **kwargs) -> None:
    """A ``connection_created`` receiver: notes the pool the connection came from, and
    starts this process's checker of its pools' idle connections, once per process (a
    forked child has no thread of its parent's)."""
    global _checker_pid
    pool = connection.pool if connection is not None else None
    if pool is not None:
        _pools[connection.alias] = pool
    if _checker_pid == os.getpid():
        return
    with _checker_lock:
        if _checker_pid != os.getpid():
            _checker_pid = os.getpid()
            threading.Thread(target=_check_pools, name="db-pool-check", daemon=True).start()


_pools: dict = {}  # alias: the pool its last connection came from
_checker_pid: int | None = None
_checker_lock = threading.Lock()


def _check_pools() -> None:
    """Every ``DB_POOL_CHECK_SECONDS``: the pool's public ``check()``, which replaces the
    idle connections the server dropped. The pool also checks each one it hands out
    (``CONN_HEALTH_CHECKS``), but waits 1, 2, 4 ... s between two dead ones, and after a
    drop an idle process's pool holds only dead ones."""
    while True:
        time.sleep(settings.DB_POOL_CHECK_SECONDS)
        for alias, pool in list(_pools.items()):
            try:
                if not pool.closed:
                    pool.check()
            except Exception:  # a pool closed meanwhile, or no server: the next round
                logger.debug("Checking the pool of %r failed", alias, exc_info=True)


def close_pools() -> None:
    """Closes this process's connection pools (Django's public ``close_pool()``): run
    before a fork, so that a child (django-q2 forks its workers) never inherits a pool
    whose connections are the parent's sockets and whose threads it does not have. Both
    processes open a pool of their own when they next need one."""
    release_pooled_connections()  # this thread's: the child must not inherit them either
    for alias in connections:
        if connections.settings[alias].get("OPTIONS", {}).get("pool"):
            connections[alias].close_pool()


def release_pooled_connections() -> None:
    """Gives this thread's connections that come from a pool (PostgreSQL's
    ``OPTIONS["pool"]``) back to it, outside transactions: a thread that is about to wait
    (on the model) holds none meanwhile, so a process's connections are bounded by its pool
    however many jobs it runs. The next statement takes one again (no new connection)."""
    for connection in connections.all(initialized_only=True):
        pooled = connection.settings_dict.get("OPTIONS", {}).get("pool")
        if pooled and connection.connection is not None and not connection.in_atomic_block:
            connection.close()


# PostgreSQL's "operator intervention" states that end a session: terminated by an
# administrator (pg_terminate_backend), by a server crash, or refused while it starts.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})


def _chain(exc: BaseException):
    """``exc`` and the errors it was raised from or while handling (a short chain; never
    followed round a cycle)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def is_connection_loss(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from or while handling, says that the
    database connection was lost rather than that a statement failed: the PostgreSQL
    driver's error of a session the server ended, or of a connection it found closed."""
    try:
        import psycopg
    except ImportError:  # no PostgreSQL here
        return False
    for seen in _chain(exc):
        if isinstance(seen, psycopg.OperationalError):
            sqlstate = getattr(seen, "sqlstate", None)
            if sqlstate is None or sqlstate in _SESSION_ENDED:
                return True
    return False


def _pool_timed_out(exc: BaseException) -> bool:
    from psycopg_pool import PoolTimeout  # only a PostgreSQL error gets here

    return any(isinstance(seen, PoolTimeout) for seen in _chain(exc))


def was_dropped(exc: BaseException) -> bool:
    """Whether ``exc`` says that this thread's connection was lost outside a transaction,
    so that its work may run once more on a new one (not a pool that had none to give
    within its timeout: another wait would not help; not inside a transaction: its earlier
    work went with the connection)."""
    if isinstance(exc, OperationalError):
        if not is_connection_loss(exc) or _pool_timed_out(exc):
            return False
    elif not isinstance(exc, InterfaceError):  # InterfaceError: a connection closed
        return False
    return not any(c.in_atomic_block for c in connections.all(initialized_only=True))


def _lost(exc: BaseException) -> bool:
    """:func:`was_dropped`; if so this thread's connections are closed, and the next
    statement takes a new one."""
    if not was_dropped(exc):
        return False
    logger.warning("Database connection was dropped; once more on a new one")
    for connection in connections.all(initialized_only=True):
        connection.close()
    return True


# Runs of a request's work at most: drops every few seconds on a slow machine can cut the
# second run too.
RUNS = 3


def run_again_if_dropped(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)``, run again on a new connection (``RUNS`` times at most) if a
    run lost its connection. ``func`` must be safe to repeat when nothing it wrote is known to be
    committed: reads, and writes in autocommit or in transactions of their own (a commit
    the server made before the cut may then be made twice: a service for which that
    matters uses :func:`run_again_if_dropped_at_commit`)."""
    for _ in range(RUNS - 1):
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            if not _lost(exc):
                raise
    return func(*args, **kwargs)


def run_again_if_dropped_at_commit(
    func: Callable[[], T], *, committed: Callable[[], T | None]
) -> T:
    """Runs ``func``, a service whose writes commit in one transaction of its own, once more
    on a new connection if the connection was lost on the way, its commit included.

    A statement cut before the commit leaves nothing (the server discards the transaction).
    A cut commit leaves the outcome unknown: the server may have committed before the
    connection went. ``committed()``, run on the new connection, settles it: the first
    run's result when its writes are in the database (so ``func`` must write something it
    can find again, such as a row whose key it chose beforehand), else None, and ``func``
    runs again. Errors of the statements themselves are never retried."""
    try:
        return func()
    except Exception as exc:
        if not _lost(exc):
            raise
        logger.warning("Database connection was lost during a write; checking its commit")
    done = committed()
    if done is not None:
        return done
    return func()


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says that the database cannot be reached (a lost connection, no
    connection within the pool's timeout, a refused connect) rather than that a statement
    failed: answered 503 ``database_unavailable``, never 500 (``core.errors``)."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    if isinstance(exc, InterfaceError):  # a connection already closed
        return True
    return is_connection_loss(exc)
