"""Database work of an async request: run in a thread, the connection given back at once.

Django's ORM is synchronous, so an async view runs its statements through
``sync_to_async`` in the request's own thread. A thread keeps its connection open until
something closes it; here it is given back (to the pool, or closed) as soon as the work is
done, so that a request holds no database connection while it awaits the model, and the
connections of a process are bounded by its pool (``DB_POOL_MAX_SIZE``), not by the number
of requests in flight. A request whose connection the server dropped runs its work once
more on a new one (``core.db``).

The exception: a thread marked by :func:`keep_connections`, one of a fixed few that the
requests of a process share (the short route's, ``config.short_route``). Their connections
are bounded by the number of such threads already, so when every database's pool has room
for them twice over (the rest of the process keeps the other half), each keeps its
connections from one request to the next, rather than taking one from the pool, which
checks it with a round trip, and giving it back at every step. A connection that the
server dropped meanwhile fails its first statement, and the work runs again on a new one,
as above.
"""

import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

from core import tracing
from core.db import pool_max_size, run_again_if_dropped

P = ParamSpec("P")
T = TypeVar("T")


_thread = threading.local()


def keep_connections(threads: int) -> None:
    """A thread pool's initializer: marks this thread as one of ``threads`` shared by many
    requests, which keep their connections between requests when the pools allow it."""
    _thread.shared_by = threads


def _keeps_connections() -> bool:
    """Whether this thread keeps its connections: it is one of a few shared threads, and
    every database's pool holds at least twice as many connections as there are of them
    (with fewer, the rest of the process would wait for connections never given back)."""
    threads = getattr(_thread, "shared_by", 0)
    if not threads:
        return False
    return all((pool_max_size(alias) or 0) >= 2 * threads for alias in connections)


def release_connections() -> None:
    """Gives back this thread's database connections, except one inside a transaction
    (a test's, which must see its own rows)."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


async def in_thread(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` in the request's thread, its connections given back before
    this returns (also when it raises)."""

    def run() -> T:
        try:
            with tracing.database_spans():
                return run_again_if_dropped(func, *args, **kwargs)
        finally:
            if not _keeps_connections():
                release_connections()

    return await sync_to_async(run)()
