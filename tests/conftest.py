"""Shared fixtures: a real loopback model runtime, keys and an API client."""

import uuid
from collections.abc import Callable, Iterator

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import AsyncClient, override_settings
from rest_framework.test import APIClient

from config import short_route
from core.db import close_pools
from gateway import health, routing, services
from gateway import runtime as runtime_client
from tests.factories import wait_for
from tests.live import (
    Cluster,
    RedisServer,
    WebServer,
    service_env,
    wait_for_other_sessions_to_end,
)
from tests.runtime_server import RuntimeServer

# Tests of one database exist only when the suite runs on that database. The fault tests
# run real processes for seconds each: those of the jobs run once, on the production
# database; the soak of the embedded database runs on SQLite.
ONLY_ON = {
    "postgresql": (
        "test_postgresql_backend.py",
        "test_postgresql_pool.py",
        "test_faults.py",
        "test_faults_postgresql.py",
        "test_webhook_faults.py",
    ),
    "sqlite": ("test_faults_sqlite.py",),
}
collect_ignore = [
    name for vendor, names in ONLY_ON.items() if vendor != connection.vendor for name in names
]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory):
    """On SQLite the test database is a file, not memory (unless TEST_DATABASE_NAME names
    one): threads then lock it as in production, and a ``qcluster`` subprocess can share it."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3" and not db["TEST"].get("NAME"):
        db["TEST"]["NAME"] = str(tmp_path_factory.mktemp("sqlite") / "test.sqlite3")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, and the connections that the short route's threads keep given back
    and the pools of every alias closed before the test database is dropped: Django closes
    the pool of the alias it drops, not a test mirror's (``usage``)."""
    yield
    short_route.give_back_connections()
    close_pools()


@pytest.fixture(scope="session", autouse=True)
def usage_in_the_tests_transaction():
    """Usage records written in this process go to ``default``, in the test's transaction:
    on PostgreSQL the service writes them on connections of their own (``USAGE_DATABASE``),
    which would not see the test's uncommitted key. The tests of those connections set the
    production value (tests/test_postgresql_backend.py); servers the suite starts use it."""
    with override_settings(USAGE_DATABASE="default"):
        yield


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
    health.forget()
    yield runtime_server
    routing.clear_cache()
    runtime_client.forget_tokenizers()
    health.forget()


@pytest.fixture
def make_key(db):
    """Creates keys: ``make_key(name="x", scopes=("model",), ...)`` -> (ApiKey, plain)."""

    def make(name: str = "tester", **kwargs):
        for limit in (
            "rate_limit_per_minute",
            "agent_starts_per_minute",
            "agent_reads_per_minute",
            "max_active_jobs",
        ):
            kwargs.setdefault(limit, 0)  # unlimited unless a test is about a limit
        return services.api_key_create(name=name, **kwargs)

    return make


@pytest.fixture
def api_key(make_key) -> str:
    """The plain text of a live key with both scopes."""
    return make_key()[1]


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


class AsgiClient:
    """Django's AsyncClient with the sync client's calling style: a request takes the ASGI
    path (the async middleware chain, the view awaited on an event loop), as under the
    production server."""

    def __init__(self) -> None:
        self._client = AsyncClient()

    def __getattr__(self, method: str):
        return async_to_sync(getattr(self._client, method))


@pytest.fixture
def asgi_client() -> AsgiClient:
    return AsgiClient()


@pytest.fixture
def asgi_server(runtime, unused_port, transactional_db) -> Iterator[tuple[str, int]]:
    """The production request path: uvicorn serving config.asgi, in a thread of this process
    (it shares the test's settings and database); yields its host and port."""
    import threading

    import uvicorn

    from config.asgi import application

    server = uvicorn.Server(
        uvicorn.Config(
            application, host="127.0.0.1", port=unused_port, lifespan="off", log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, what="uvicorn to start")
    yield "127.0.0.1", unused_port
    server.should_exit = True
    thread.join(timeout=10)


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


# --- The admin --------------------------------------------------------------------------

STAFF_PASSWORD = "correct horse battery staple"


@pytest.fixture
def plain_static_storage(settings):
    """Admin pages link static files; the manifest storage would need collectstatic first."""
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("boss", "boss@example.com", STAFF_PASSWORD)


@pytest.fixture
def staff_client(client, superuser, plain_static_storage):
    """A client logged in through the admin's own login form."""
    from django.urls import reverse

    response = client.post(
        reverse("admin:login"),
        {"username": "boss", "password": STAFF_PASSWORD, "next": reverse("admin:index")},
    )
    assert response.status_code == 302, response.content
    assert response["Location"] == reverse("admin:index")
    return client


# --- The service as real processes (tests/live.py) ---------------------------------------


@pytest.fixture
def start_cluster(runtime, tmp_path) -> Iterator[Callable[..., Cluster]]:
    """Starts qclusters on the test database that call the loopback runtime (or
    ``MODEL_RUNTIME_URL=...``); stops them all at the end."""
    clusters: list[Cluster] = []

    def start(**extra_env: str) -> Cluster:
        env = service_env(runtime.url, **extra_env)
        cluster = Cluster(env, tmp_path / f"qcluster-{len(clusters)}.log")
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        cluster.kill()  # a test's end: nothing to finish, and a clean stop costs seconds
    wait_for_other_sessions_to_end()


@pytest.fixture
def start_web(runtime, tmp_path) -> Iterator[Callable[..., WebServer]]:
    """Starts the production web server on the test database; stops it at the end."""
    servers: list[WebServer] = []

    def start(**extra_env: str) -> WebServer:
        env = service_env(runtime.url, **extra_env)
        server = WebServer(env, tmp_path / f"web-{len(servers)}.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.kill()
    wait_for_other_sessions_to_end()


@pytest.fixture
def redis_server(tmp_path) -> Iterator[RedisServer]:
    """A redis-server of this test's own (the shared one is never restarted by tests)."""
    server = RedisServer(tmp_path / "redis.log")
    yield server
    server.kill()


@pytest.fixture
def use_redis_broker(monkeypatch) -> Iterator[Callable[[str], dict[str, str]]]:
    """``use_redis_broker(url)``: this process enqueues on Redis at ``url`` under a cluster
    name of this test's own; returns the environment of clusters that serve that queue.

    django-q2 reads its broker settings once, at import, into ``Conf``: this process was
    configured for the database broker, so the test switches ``Conf`` itself.
    """
    from django_q.conf import Conf

    used: list[tuple[str, str]] = []

    def use(url: str) -> dict[str, str]:
        name = f"llmgw-test-{uuid.uuid4().hex[:10]}"
        for attr, value in {
            "ORM": None,
            "REDIS": url,
            "BROKER_CLASS": "agents.broker.RedisBroker",
            "PREFIX": name,
            "CLUSTER_NAME": name,
        }.items():
            monkeypatch.setattr(Conf, attr, value)
        used.append((url, name))
        return {"REDIS_URL": url, "Q_CLUSTER_NAME": name}

    yield use
    import redis

    for url, name in used:
        try:
            client = redis.from_url(url)
            keys = list(client.scan_iter(f"django_q:{name}:*"))
            if keys:
                client.delete(*keys)
        except redis.ConnectionError:
            pass  # a server of the test's own, gone with it
