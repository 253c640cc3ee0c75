"""Django's PostgreSQL backend, safe in a process forked from one that had a pool.

Django checks every connection its pool hands out (``CONN_HEALTH_CHECKS``: psycopg_pool's
own check, one round trip), so a connection the server dropped is replaced before a request
uses it.

A process forked from one that had opened a pool (django-q2 forks its workers) inherits
that pool without its threads, and with its connections, whose sockets are the parent's:
using them would interleave two processes' statements on one connection, and a pool without
its threads never replaces a connection, so its waiters time out. The child makes pools of
its own instead. The parent's are kept referenced, never closed or collected here: closing
a connection would end it for the parent too.
"""

import os

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    pass


_inherited_pools: list = []


def _forget_the_parents_pools() -> None:
    _inherited_pools.extend(DatabaseWrapper._connection_pools.values())
    DatabaseWrapper._connection_pools.clear()


os.register_at_fork(after_in_child=_forget_the_parents_pools)
