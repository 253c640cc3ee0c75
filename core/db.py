"""Database connections that the server dropped: noticed, replaced, and the work done once more.

A database restart, a failover or ``pg_terminate_backend`` cuts every connection at once.
Django notices a dead connection only through the health check when a request takes one,
which a worker process or a thread of our own never runs, and a connection may be cut while
a request holds it. So a statement on a dropped connection fails. Here that statement is
retried once, on a new connection, when it is safe to: outside a transaction (inside one,
the transaction's earlier work is gone with the connection) and only when the connection
really is gone (a round trip says so), never for errors of the statement itself. When the
database stays out of reach, :func:`is_database_unavailable` makes it a 503.
"""

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def _dropped(alias: str) -> bool:
    """Whether the connection of ``alias`` is open but no longer answers (one round trip)."""
    connection = connections[alias]
    return connection.connection is not None and not connection.is_usable()


def close_dropped_connections() -> None:
    """Closes this thread's connections that no longer answer, outside transactions, so that
    the next statement opens a new one. A worker calls it before each task."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block and _dropped(connection.alias):
            logger.warning("Database connection %r was dropped; replacing it", connection.alias)
            _replace(connection)


def release_pooled_connections() -> None:
    """Gives this thread's connections that come from a pool (PostgreSQL's
    ``OPTIONS["pool"]``) back to it, outside transactions: a thread that is about to wait
    (on the model) holds none meanwhile, so a process's connections are bounded by its pool
    however many jobs it runs. The next statement takes one again (no new connection)."""
    for connection in connections.all(initialized_only=True):
        pooled = connection.settings_dict.get("OPTIONS", {}).get("pool")
        if pooled and connection.connection is not None and not connection.in_atomic_block:
            connection.close()


def retry_if_dropped(
    func: Callable[P, T], *args: P.args, using: str = DEFAULT_DB_ALIAS, **kwargs: P.kwargs
) -> T:
    """``func(*args, **kwargs)``, run once more on a new connection if the first run met a
    connection the server had dropped. ``func`` must be safe to repeat: a read, or one
    statement in autocommit mode that the dropped connection cannot have committed."""
    try:
        return func(*args, **kwargs)
    except (OperationalError, InterfaceError):
        if connections[using].in_atomic_block or not replace_if_dropped(using):
            raise
    return func(*args, **kwargs)


def replace_if_dropped(using: str = DEFAULT_DB_ALIAS) -> bool:
    """After a database error: whether the connection had been dropped by the server; if so
    it is closed, and the next statement opens a new one."""
    if not _dropped(using):
        return False
    logger.warning("Database connection %r was dropped; replacing it", using)
    _replace(connections[using])
    return True


def _replace(connection: BaseDatabaseWrapper) -> None:
    """Closes a dropped connection (a pool discards it, and checks the one it hands out
    next: the server has most likely dropped its idle ones too)."""
    connection.close()


# PostgreSQL's "operator intervention" states that end a session: terminated by an
# administrator (pg_terminate_backend), by a server crash, or refused while it starts.
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03"})


def is_connection_loss(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from or while handling, says that the
    database connection was lost rather than that a statement failed: the PostgreSQL
    driver's error of a session the server ended, or of a connection it found closed."""
    try:
        import psycopg
    except ImportError:  # no PostgreSQL here
        return False
    seen: BaseException | None = exc
    for _ in range(10):  # a chain of causes is short; never loop on a cycle
        if seen is None:
            break
        if isinstance(seen, psycopg.OperationalError):
            sqlstate = getattr(seen, "sqlstate", None)
            if sqlstate is None or sqlstate in _SESSION_ENDED:
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def retry_if_dropped_at_commit(func: Callable[[], T], *, committed: Callable[[], T | None]) -> T:
    """Runs ``func``, a service whose writes commit in one transaction of its own, once more
    on a new connection if the connection was lost on the way, its commit included.

    A statement cut before the commit leaves nothing (the server discards the transaction).
    A cut commit leaves the outcome unknown: the server may have committed before the
    connection went. ``committed()``, run on the new connection, settles it: the first
    run's result when its writes are in the database (so ``func`` must write something it
    can find again, such as a row whose key it chose beforehand), else None, and ``func``
    runs again. Errors of the statements themselves are never retried."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.in_atomic_block:
        return func()
    try:
        return func()
    except (OperationalError, InterfaceError) as exc:
        if is_connection_loss(exc):
            logger.warning("Database connection was lost during a write; checking its commit")
            _replace(connection)
        elif not replace_if_dropped():
            raise
    done = retry_if_dropped(committed)
    if done is not None:
        return done
    return func()


def retry_if_dropped_before_commit(func: Callable[P, T]) -> Callable[P, T]:
    """Runs ``func``, a service that reads and then writes in a transaction of its own, once
    more on a new connection if one of its statements met a connection the server had
    dropped: the server then discarded the transaction, so nothing of the first run stays.
    A failing commit is not retried (the server may have committed before it was cut)."""

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        connection = connections[DEFAULT_DB_ALIAS]
        if connection.in_atomic_block:
            return func(*args, **kwargs)
        lost: list[BaseException] = []

        def watch(execute, sql, params, many, context):
            try:
                return execute(sql, params, many, context)
            except (OperationalError, InterfaceError) as exc:
                if is_connection_loss(exc):
                    lost.append(exc)
                raise

        try:
            with connection.execute_wrapper(watch):
                return func(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if not lost:
                raise
            logger.warning("Database connection was dropped before the commit; once more")
            replace_if_dropped()
        return func(*args, **kwargs)

    return run


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says that the database cannot be reached (a lost connection, no
    connection within the pool's timeout, a refused connect) rather than that a statement
    failed: answered 503 ``database_unavailable``, never 500 (``core.errors``)."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    if isinstance(exc, InterfaceError):  # a connection already closed
        return True
    return is_connection_loss(exc)
