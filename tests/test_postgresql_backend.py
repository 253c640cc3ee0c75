"""config.postgresql: Django's backend, with the health check skipped for a connection that
served a request a moment ago. Collected only when the suite runs on PostgreSQL."""

import time

import pytest
from django.db import OperationalError, close_old_connections, connection, connections

pytestmark = pytest.mark.django_db(transaction=True)


def request_cycle() -> None:
    """What one request does to the connection: Django's request_started and
    request_finished handlers around a query."""
    close_old_connections()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        close_old_connections()


def terminate_backend() -> int:
    """Has the server drop this thread's connection; returns the backend pid it had."""
    pid = connection.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()
    return pid


def idle_window(monkeypatch, seconds: float) -> None:
    # On the wrapper itself: monkeypatch cannot restore an attribute set through the proxy.
    monkeypatch.setattr(connections["default"], "health_check_idle", seconds)


@pytest.fixture
def checks(monkeypatch) -> list[int]:
    """One entry per health check the connection makes."""
    made: list[int] = []
    wrapper = connections["default"]
    check = wrapper.is_usable
    monkeypatch.setattr(wrapper, "is_usable", lambda: made.append(1) or check())
    return made


def test_a_connection_that_served_a_request_a_moment_ago_is_not_checked(checks):
    request_cycle()
    checks.clear()
    request_cycle()
    request_cycle()
    assert checks == []


def test_a_connection_idle_longer_than_the_window_is_checked_first(checks, monkeypatch):
    idle_window(monkeypatch, 0.05)
    request_cycle()
    time.sleep(0.1)
    checks.clear()
    request_cycle()
    assert checks == [1]


def test_a_window_of_zero_checks_before_every_request(checks, monkeypatch):
    idle_window(monkeypatch, 0.0)
    request_cycle()
    checks.clear()
    request_cycle()
    request_cycle()
    assert checks == [1, 1]


def test_a_connection_the_server_dropped_while_idle_is_replaced_before_use(monkeypatch):
    idle_window(monkeypatch, 0.05)
    request_cycle()
    dropped = terminate_backend()
    time.sleep(0.1)
    request_cycle()
    assert connection.connection.info.backend_pid != dropped


def test_a_connection_dropped_within_the_window_fails_one_request_then_is_replaced(checks):
    request_cycle()
    dropped = terminate_backend()
    with pytest.raises(OperationalError):
        request_cycle()
    request_cycle()
    assert connection.connection.info.backend_pid != dropped
