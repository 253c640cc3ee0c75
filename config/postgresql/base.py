"""Django's PostgreSQL backend with a health check that idle connections only pay.

With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` before the first query of every
request that reuses a connection: a round trip on every request. Connection pools skip that
check for a connection that was in use a moment ago (HikariCP's ``aliveBypassWindowMs``,
500 ms), because a connection that just worked is as good as proven. So does this backend:
a connection that finished a request without a database error less than
``HEALTH_CHECK_IDLE`` seconds ago (``DATABASES`` key, from ``DB_CONN_HEALTH_CHECK_IDLE``)
is used without the check; one idle for longer, which a server restart or an idle timeout
may have cut, is checked first as Django does. ``0`` checks before every request.

With a pool (``OPTIONS["pool"]``) a connection goes back to the pool at the end of each
request, and the pool checks it when it hands it out next, unless it was checked less than
the same window ago and no connection of the process has failed since
(``config.postgresql.pool``).
"""

import os
import time

from django.db.backends.postgresql import base

from config.postgresql import pool as pool_check


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.health_check_idle = float(self.settings_dict.get("HEALTH_CHECK_IDLE", 0))
        self._proven_at = float("-inf")

    def close_if_health_check_failed(self) -> None:
        if (
            self.health_check_enabled
            and not self.health_check_done
            and time.monotonic() - self._proven_at < self.health_check_idle
        ):
            self.health_check_done = True
        super().close_if_health_check_failed()

    def close_if_unusable_or_obsolete(self) -> None:
        # Called when a request starts and when it ends. health_check_done is true only
        # if this request used the connection (the first query set it); errors_occurred,
        # if a query failed in a way other than a data or integrity error.
        if self.connection is not None and self.health_check_done and not self.errors_occurred:
            self._proven_at = time.monotonic()
        super().close_if_unusable_or_obsolete()

    @property
    def pool(self):  # type: ignore[override]
        # Django's pool, whose check (with CONN_HEALTH_CHECKS) skips a connection proven
        # less than HEALTH_CHECK_IDLE seconds ago. Django passes its own check to the pool;
        # it is swapped for ours once, before the pool is opened.
        created = self.alias not in self._connection_pools
        pool = super().pool
        if created and pool is not None and self.settings_dict["CONN_HEALTH_CHECKS"]:
            pool._check = pool_check.RecentlyProvenCheck(self.health_check_idle)
        return pool

    def _close(self) -> None:
        if self.pool and self.connection is not None and self.errors_occurred:
            pool_check.note_failure()
        super()._close()


# A process forked from one that had opened a pool (django-q2 forks its workers) inherits
# that pool without its threads, and with its connections, whose sockets are the parent's:
# using them would interleave two processes' statements on one connection. The child makes
# pools of its own instead. The parent's are kept referenced, never closed or collected
# here: closing a connection would end it for the parent too.
_inherited_pools: list = []


def _forget_the_parents_pools() -> None:
    _inherited_pools.extend(DatabaseWrapper._connection_pools.values())
    DatabaseWrapper._connection_pools.clear()


os.register_at_fork(after_in_child=_forget_the_parents_pools)
