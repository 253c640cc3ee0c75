"""PostgreSQL connections of the web server: bounded by the pool however many model calls
are in flight. Collected only when the suite runs on PostgreSQL."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.asgi import IN_FLIGHT, hold_slow_calls, post
from tests.factories import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_the_database_connections_stay_within_the_pool_with_many_calls_in_flight(
    asgi_server, runtime, make_key, settings
):
    pool_size = settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]
    _, key = make_key()
    release = hold_slow_calls(runtime, settings)
    slow = {"api_key": key, "model": "test-model", "prompt": "slow"}
    with ThreadPoolExecutor(IN_FLIGHT) as clients:
        calls = [clients.submit(post, asgi_server, slow) for _ in range(IN_FLIGHT)]
        wait_for(lambda: len(runtime.generate_requests()) == IN_FLIGHT, what="calls in flight")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            )
            [open_connections] = cursor.fetchone()
        release.set()
        assert all(call.result()[0] == 200 for call in calls)
    assert IN_FLIGHT > pool_size >= open_connections
