"""Shared fixtures: a real loopback model runtime, keys and an API client."""

from collections.abc import Iterator

import pytest
from django.db import connection
from rest_framework.test import APIClient

from gateway import routing, services
from gateway import runtime as runtime_client
from tests.runtime_server import RuntimeServer

# The PostgreSQL backend's own tests exist only when the suite runs on PostgreSQL.
collect_ignore = [] if connection.vendor == "postgresql" else ["test_postgresql_backend.py"]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """On SQLite the test database is a file, not memory (unless TEST_DATABASE_NAME names
    one): threads then lock it as in production, and a ``qcluster`` subprocess can share it."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3" and not db["TEST"].get("NAME"):
        db["TEST"]["NAME"] = str(tmp_path_factory.mktemp("sqlite") / "test.sqlite3")


@pytest.fixture(scope="session")
def runtime_server() -> Iterator[RuntimeServer]:
    from django.conf import settings

    # AGENT_MODEL is the model of the default agent profile.
    with RuntimeServer(models=("test-model", "other-model", settings.AGENT_MODEL)) as server:
        yield server


@pytest.fixture
def runtime(runtime_server: RuntimeServer, settings) -> Iterator[RuntimeServer]:
    """The loopback runtime, emptied, as the default Ollama endpoint of this test."""
    runtime_server.reset()
    settings.MODEL_RUNTIME_URL = runtime_server.url
    settings.MODEL_RUNTIME_API = "ollama"
    settings.MODEL_RUNTIME_API_KEY = ""
    settings.RUNTIME_READ_TIMEOUT = 5.0
    routing.clear_cache()
    runtime_client.forget_tokenizers()
    yield runtime_server
    routing.clear_cache()
    runtime_client.forget_tokenizers()


@pytest.fixture
def make_key(db):
    """Creates keys: ``make_key(name="x", scopes=("model",), ...)`` -> (ApiKey, plain)."""

    def make(name: str = "tester", **kwargs):
        kwargs.setdefault("rate_limit_per_minute", 0)
        return services.api_key_create(name=name, **kwargs)

    return make


@pytest.fixture
def api_key(make_key) -> str:
    """The plain text of a live key with both scopes."""
    return make_key()[1]


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def agent_client(api_key: str) -> APIClient:
    """A client that sends ``Authorization: Bearer <key>`` on every request."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return client


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def sync_queue(settings):
    """django-q2 runs each task inline when it is enqueued (its sync mode)."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
