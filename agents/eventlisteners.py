"""The listeners of the event bus (``agents.eventbus``): one per web process, for the
announcements of every writer (``agents.events``). A listener that loses its connection
connects again, and then has every watch read the table, so nothing announced meanwhile is
lost."""

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings

from agents import events

if TYPE_CHECKING:
    from agents.eventbus import Hub

logger = logging.getLogger(__name__)

#: Pause before a lost connection is tried again.
RETRY_SECONDS = 0.5


async def listen_redis(hub: "Hub") -> None:
    """Redis pub/sub on the announcements' channel."""
    import redis.asyncio as aioredis

    while True:
        client = aioredis.Redis.from_url(settings.REDIS_URL, health_check_interval=10)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(events.CHANNEL)
            hub.resync_all()  # what was announced while not listening
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    hub.received(message["data"])
        except Exception as exc:
            logger.warning("Event listener (Redis) lost (%s); reconnecting", exc)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
                await client.aclose()
        await asyncio.sleep(RETRY_SECONDS)


async def listen_postgresql(hub: "Hub") -> None:
    """PostgreSQL's LISTEN on its own connection (not Django's: it waits for ever)."""
    import psycopg

    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                **_connection_params(), autocommit=True
            ) as conn:
                await conn.execute(f"LISTEN {events.CHANNEL}")
                hub.resync_all()
                async for notice in conn.notifies():
                    hub.received(notice.payload)
        except Exception as exc:
            logger.warning("Event listener (PostgreSQL) lost (%s); reconnecting", exc)
        await asyncio.sleep(RETRY_SECONDS)


def _connection_params() -> dict[str, Any]:
    """The default database's connection settings, for the listener's own connection."""
    db_settings = settings.DATABASES["default"]
    params = {
        "dbname": db_settings["NAME"],
        "user": db_settings.get("USER") or None,
        "password": db_settings.get("PASSWORD") or None,
        "host": db_settings.get("HOST") or None,
        "port": db_settings.get("PORT") or None,
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 2,
    }
    return {name: value for name, value in params.items() if value is not None}


LISTENERS = {"redis": listen_redis, "postgresql": listen_postgresql}
