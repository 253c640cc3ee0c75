"""The health check of the per-process PostgreSQL connection pool (``OPTIONS["pool"]``).

psycopg_pool checks a connection as it hands it out: a round trip each time. As without a
pool (``config.postgresql.base``), a connection proven alive less than
``HEALTH_CHECK_IDLE`` seconds ago is handed out unchecked. Proven means checked: so a
connection in constant use is checked about once per window, not once per request. And
once any connection of the process has failed (``note_failure``: the server restarted or
dropped connections, which it does to all at once), none proven before that is trusted.
"""

import time
from typing import Any

# The attribute of a psycopg connection that holds when it was last checked alive.
PROVEN_AT = "_llmgw_proven_at"
_last_failure = [float("-inf")]


def note_failure() -> None:
    """A connection of this process met a database error: check every connection again."""
    _last_failure[0] = time.monotonic()


class RecentlyProvenCheck:
    """The pool's ``check``: psycopg_pool's own, skipped for a connection proven within
    ``idle`` seconds and since the last failure."""

    def __init__(self, idle: float) -> None:
        self.idle = idle

    def __call__(self, conn: Any) -> None:
        proven = getattr(conn, PROVEN_AT, float("-inf"))
        if proven > _last_failure[0] and time.monotonic() - proven < self.idle:
            return
        from psycopg_pool import ConnectionPool

        ConnectionPool.check_connection(conn)
        setattr(conn, PROVEN_AT, time.monotonic())
