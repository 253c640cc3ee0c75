"""Database work of an async request: run in a thread, the connection given back at once.

Django's ORM is synchronous, so an async view runs its statements through
``sync_to_async`` in the request's own thread. A thread keeps its connection open until
something closes it; here it is given back (to the pool, or closed) as soon as the work is
done, so that a request holds no database connection while it awaits the model, and the
connections of a process are bounded by its pool (``DB_POOL_MAX_SIZE``), not by the number
of requests in flight. A request whose connection the server dropped runs its work once
more on a new one (``core.db``).
"""

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

from core import tracing
from core.db import run_again_if_dropped

P = ParamSpec("P")
T = TypeVar("T")


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
            release_connections()

    return await sync_to_async(run)()
