"""django-q2's brokers, kept pulling through a dropped database connection or a Redis restart.

django-q2's pusher (the process that takes wake-up messages off the broker for the workers)
treats any error of the broker as a crash: it sleeps 10 s and exits, and the cluster starts
a new one. A database server that dropped its connections, or a Redis that restarted, thus
stopped every cluster's intake for 10 s. These brokers report the error and ask again a
moment later on a new connection (django-q2's ORM broker closes a connection that had an
error before its next query; redis-py reconnects its pool), so the intake stops only while
the server is really away.
"""

import logging
import time

import redis
from django.db import DatabaseError
from django_q.brokers import orm, redis_broker

logger = logging.getLogger(__name__)

#: How long the pusher waits before asking a broker that failed again.
RETRY_DELAY = 0.5


class ORMBroker(orm.ORM):
    def dequeue(self):
        try:
            return super().dequeue()
        except DatabaseError as exc:
            logger.warning("Queue: the database broker failed (%s); asking again", exc)
            time.sleep(RETRY_DELAY)
            return None


class RedisBroker(redis_broker.Redis):
    def dequeue(self):
        try:
            return super().dequeue()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.warning("Queue: Redis is unreachable (%s); asking again", exc)
            time.sleep(RETRY_DELAY)
            return None
