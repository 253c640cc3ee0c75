"""Django's PostgreSQL backend, whose connections are checked before every request, with a
pool (``DB_POOL_MAX_SIZE``, the default) and without one; ``core.db``'s work run again on a
new connection. Collected only when the suite runs on PostgreSQL.

Each test gets a database wrapper of its own, configured for its mode, so that the suite's
own connection is left alone.
"""

import asyncio
import itertools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg_pool
import pytest
from asgiref.sync import ThreadSensitiveContext
from django.db import (
    DataError,
    IntegrityError,
    OperationalError,
    close_old_connections,
    connection,
    connections,
    transaction,
)
from django.db.backends.postgresql.base import DatabaseWrapper
from django.test.utils import CaptureQueriesContext

from agents.models import Job
from config import short_route
from core import db
from gateway import services
from gateway.dbthread import in_thread, keep_connections, release_connections
from gateway.models import UsageRecord

pytestmark = pytest.mark.django_db(transaction=True)

_aliases = itertools.count()


@pytest.fixture(params=["pool", "no pool"])
def make_wrapper(request) -> Iterator:
    """Makes a wrapper of the test database in the mode of the test's parameter."""
    made: list[DatabaseWrapper] = []

    def make() -> DatabaseWrapper:
        base = connections["default"].settings_dict
        options = {k: v for k, v in base["OPTIONS"].items() if k != "pool"}
        settings_dict = {**base, "CONN_HEALTH_CHECKS": True}
        if request.param == "pool":
            options["pool"] = {"min_size": 0, "max_size": 2, "timeout": 5}
            settings_dict["CONN_MAX_AGE"] = 0
        else:
            settings_dict["CONN_MAX_AGE"] = 600
        settings_dict["OPTIONS"] = options
        wrapper = DatabaseWrapper(settings_dict, alias=f"backend-test-{next(_aliases)}")
        made.append(wrapper)
        return wrapper

    yield make
    for wrapper in made:
        wrapper.close()
        if wrapper.pool:
            wrapper.close_pool()


@pytest.fixture
def checks(monkeypatch) -> list[int]:
    """One entry per health check made (a round trip), in either mode."""
    made: list[int] = []
    is_usable = DatabaseWrapper.is_usable
    check_connection = psycopg_pool.ConnectionPool.check_connection
    monkeypatch.setattr(
        DatabaseWrapper, "is_usable", lambda self: made.append(1) or is_usable(self)
    )
    monkeypatch.setattr(
        psycopg_pool.ConnectionPool,
        "check_connection",
        staticmethod(lambda conn: made.append(1) or check_connection(conn)),
    )
    return made


def request_cycle(wrapper: DatabaseWrapper) -> int:
    """What one request does to the connection (Django's request_started and
    request_finished handlers around a query); returns the server process it talked to."""
    wrapper.close_if_unusable_or_obsolete()
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]
    finally:
        wrapper.close_if_unusable_or_obsolete()


def terminate(pid: int) -> None:
    """Has the server drop the connection of process ``pid`` (asked on another one)."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()


def test_a_reused_connection_is_checked_before_every_request(make_wrapper, checks):
    wrapper = make_wrapper()
    request_cycle(wrapper)
    checks.clear()
    request_cycle(wrapper)
    request_cycle(wrapper)
    assert checks == [1, 1]


def test_a_connection_the_server_dropped_is_replaced_before_the_next_request(make_wrapper):
    wrapper = make_wrapper()
    dropped = request_cycle(wrapper)
    terminate(dropped)
    assert request_cycle(wrapper) != dropped  # no request fails


# --- core.db: the work run again on a new connection ----------------------------------
#
# On the suite's own connection (pooled, as the service's): it is opened, kept checked
# out, and dropped by the server; the work under test then meets it dead.


def drop_the_connection(alias: str = "default") -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    terminate(pid)
    return pid


def test_a_key_read_on_a_dropped_connection_reconnects_and_succeeds(make_key):
    api_key, plain = make_key()
    dropped = drop_the_connection()
    assert db.run_again_if_dropped(services.api_key_authenticate, plain) == api_key
    assert connection.connection.info.backend_pid != dropped


# --- Usage records: written on connections of their own (settings.USAGE_DATABASE) -------
#
# The suite writes them on ``default``, in each test's transaction (tests/conftest.py); these
# tests use the production setting, and servers the suite starts use it too.

USAGE = pytest.mark.django_db(transaction=True, databases=["default", "usage"])


def synchronous_commit(alias: str) -> str:
    with connections[alias].cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@USAGE
def test_a_model_calls_usage_record_is_one_statement_that_commits_asynchronously(
    runtime, make_key, settings
):
    settings.USAGE_DATABASE = "usage"
    api_key, _ = make_key()
    with CaptureQueriesContext(connections["usage"]) as written:
        services.model_call(api_key=api_key, model="test-model", prompt="hi")
    assert [query["sql"].split()[0] for query in written] == ["INSERT"]
    [record] = UsageRecord.objects.all()  # read on default: the same database
    assert (record.api_key_id, record.origin, record.model) == (api_key.pk, "api", "test-model")
    assert (record.status, record.error, record.prompt_chars) == (200, "", 2)
    assert synchronous_commit("usage") == "off"


@USAGE
def test_an_asynchronous_commit_covers_no_other_write(make_key):
    api_key, _ = make_key()
    UsageRecord.objects.using("usage").create(api_key=api_key, model="m", status=200, elapsed=0.1)
    assert synchronous_commit("default") == "on"
    with transaction.atomic():
        assert synchronous_commit("default") == "on"


@USAGE
def test_a_usage_record_on_its_own_connections_is_held_to_the_database_constraints(make_key):
    api_key, _ = make_key()
    with pytest.raises(IntegrityError):
        UsageRecord.objects.using("usage").create(
            api_key=api_key, model="m", status=-1, elapsed=0.1
        )
    assert not UsageRecord.objects.exists()


@USAGE
def test_a_usage_write_on_a_dropped_connection_reconnects_and_is_written_once(make_key):
    api_key, _ = make_key()
    drop_the_connection("usage")
    db.run_again_if_dropped(
        UsageRecord.objects.using("usage").create,
        api_key=api_key,
        model="m",
        status=200,
        elapsed=0.1,
    )
    assert UsageRecord.objects.filter(api_key=api_key).count() == 1


def test_the_work_of_an_async_view_cut_by_a_drop_runs_again_on_a_new_connection(make_key):
    """``gateway.dbthread.in_thread``, the entry of /api.php's and /v1/'s statements: the
    connection is dropped while the work holds it, and the work runs once more."""
    api_key, plain = make_key()
    dropped: list[int] = []

    def admit():
        if not dropped:
            dropped.append(drop_the_connection())
        pid = connection.connection.info.backend_pid if connection.connection else None
        return services.api_key_authenticate(plain), pid

    read, pid = asyncio.run(in_thread(admit))
    assert read == api_key and len(dropped) == 1 and pid != dropped[0]


def test_work_cut_by_a_drop_twice_runs_a_third_time_and_no_more(make_key):
    api_key, plain = make_key()
    runs: list[int] = []

    def admit():
        runs.append(1)
        drop_the_connection()  # every run: the last one's error is the caller's
        return services.api_key_authenticate(plain)

    with pytest.raises(OperationalError):
        db.run_again_if_dropped(admit)
    assert len(runs) == db.RUNS == 3
    runs.clear()

    def admit_after_two_drops():
        runs.append(1)
        if len(runs) < 3:
            drop_the_connection()
        return services.api_key_authenticate(plain)

    assert db.run_again_if_dropped(admit_after_two_drops) == api_key and len(runs) == 3


def test_a_dropped_connection_inside_a_transaction_is_not_retried(make_key):
    _, plain = make_key()
    drop_the_connection()
    with pytest.raises(OperationalError), transaction.atomic():
        db.run_again_if_dropped(services.api_key_authenticate, plain)


def test_an_error_of_the_statement_itself_is_not_retried():
    calls = []

    def bad_statement():
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    with pytest.raises(DataError):
        db.run_again_if_dropped(bad_statement)
    assert calls == [1]


def test_a_worker_thread_gives_its_connection_back_after_a_task_and_gets_a_checked_one():
    """What a job thread does after each job (``agents.jobthreads``): Django's
    ``close_old_connections``; the pool checks the connection it hands out next."""
    dropped = drop_the_connection()
    close_old_connections()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.connection.info.backend_pid != dropped


def test_a_chat_start_whose_connection_was_dropped_runs_once_on_a_new_connection(make_key, client):
    """The agent API's entry (``agents.api.AgentAPIView``) runs the request once more."""
    from conversations.models import Message
    from tests.factories import default_profile

    default_profile()
    _, plain = make_key()
    drop_the_connection()
    answer = client.post(
        "/agent/chat",
        {"source": "tests", "scope_type": "drop", "scope_id": "1", "prompt": "Hello"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {plain}",
    )
    assert answer.status_code == 200, answer.content
    assert Job.objects.filter(pk=answer.json()["data"]["job_id"]).exists()
    assert list(Message.objects.values_list("content", flat=True)) == ["Hello"]


def test_a_rate_limit_slot_taken_on_a_dropped_connection_reconnects_and_counts_once(make_key):
    from gateway import ratelimit
    from gateway.models import RateLimitWindow

    api_key, _ = make_key(rate_limit_per_minute=5)
    ratelimit.take_slot(api_key)  # the window's row exists: the next take is one UPDATE
    drop_the_connection()
    db.run_again_if_dropped(ratelimit.take_slot, api_key)
    assert RateLimitWindow.objects.get(api_key=api_key).count == 2


def test_a_cancel_on_a_dropped_connection_reconnects_and_cancels(make_key, client):
    from tests.factories import default_profile

    default_profile()
    api_key, plain = make_key()
    job = services_agents().task_start(
        api_key=api_key,
        source="tests",
        scope_type="drop",
        scope_id="1",
        task="t",
        profile_name=None,
    )
    drop_the_connection()
    answer = client.post(f"/agent/job/{job.pk}/cancel", HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert (answer.status_code, answer.json()["data"]["status"]) == (200, "cancelled")


# --- A commit whose answer the connection lost ------------------------------------------


def services_agents():
    from agents.services import starts as agents

    return agents


def terminate_and_wait(pid: int) -> None:
    """Has the server drop process ``pid`` and waits until it is gone."""
    terminate(pid)
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            for _ in range(200):
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
                if cursor.fetchone()[0] == 0:
                    return
                time.sleep(0.01)
    finally:
        other.close()
    raise AssertionError(f"process {pid} still runs")


@pytest.fixture
def cut_next_commit(monkeypatch):
    """``cut_next_commit(committed=...)``: the connection of the next commit is dropped by
    the server, before the server commits (``committed=False``) or after it did but before
    its answer reached us (``committed=True``). Later commits run as usual."""

    def cut(*, committed: bool) -> None:
        wrapper = connections["default"]
        real = wrapper._commit

        def commit() -> None:
            monkeypatch.setattr(wrapper, "_commit", real)
            pid = wrapper.connection.info.backend_pid
            if committed:
                real()
            terminate_and_wait(pid)
            if not committed:
                real()  # fails: the server is gone, the transaction with it
            with wrapper.wrap_database_errors:
                wrapper.connection.execute("SELECT 1")  # the answer that never came

        monkeypatch.setattr(wrapper, "_commit", commit)

    return cut


def start_chat(api_key):
    from conversations import services as chats

    return chats.chat_request(
        api_key=api_key,
        source="tests",
        scope_type="cut",
        scope_id="1",
        prompt="Hello",
        profile_name=None,
    )


@pytest.mark.parametrize("committed", [False, True], ids=["before", "after the server commit"])
def test_a_chat_start_whose_commit_was_cut_stores_its_message_and_job_once(
    make_key, cut_next_commit, committed, caplog
):
    from conversations.models import Message
    from tests.factories import default_profile

    default_profile()
    api_key, _ = make_key()
    cut_next_commit(committed=committed)
    conversation, job = start_chat(api_key)
    assert list(Job.objects.values_list("pk", flat=True)) == [job.pk]
    assert list(Message.objects.values_list("content", "job_id")) == [("Hello", job.pk)]
    assert job.conversation_id == conversation.pk
    assert Job.objects.get(pk=job.pk).enqueued_at is not None
    assert "checking its commit" in caplog.text


@pytest.mark.parametrize("committed", [False, True], ids=["before", "after the server commit"])
def test_a_task_start_whose_commit_was_cut_creates_its_job_once_and_wakes_it(
    make_key, cut_next_commit, committed, monkeypatch, caplog
):
    from tests.factories import default_profile

    agents = services_agents()
    woken: list[str] = []
    monkeypatch.setattr(agents, "_send_wakeup", woken.append)
    default_profile()
    api_key, _ = make_key()
    cut_next_commit(committed=committed)
    job = agents.task_start(
        api_key=api_key, source="tests", scope_type="cut", scope_id="1", task="t", profile_name=None
    )
    assert list(Job.objects.values_list("pk", flat=True)) == [job.pk]
    assert woken == [job.pk]
    assert "checking its commit" in caplog.text


def test_a_write_that_fails_by_itself_is_not_checked_or_run_again():
    calls: list[str] = []

    def bad_write():
        calls.append("write")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    with pytest.raises(DataError):
        db.run_again_if_dropped_at_commit(bad_write, committed=lambda: calls.append("check"))
    assert calls == ["write"]


@pytest.mark.parametrize("committed", [False, True], ids=["before", "after the server commit"])
def test_a_start_with_an_idempotency_key_whose_commit_was_cut_starts_once_and_replays(
    agent_client, cut_next_commit, committed, monkeypatch, caplog
):
    from agents.models import IdempotencyKey
    from tests.factories import default_profile

    agents = services_agents()
    woken: list[str] = []
    monkeypatch.setattr(agents, "_send_wakeup", woken.append)
    default_profile()
    body = {"source": "tests", "scope_type": "cut", "scope_id": "1", "task": "t"}

    def start():
        return agent_client.post(
            "/agent/job/start", body, format="json", HTTP_IDEMPOTENCY_KEY="cut-1"
        )

    cut_next_commit(committed=committed)
    first = start()
    assert first.status_code == 200, first.content
    job_id = first.json()["data"]["job_id"]
    assert list(Job.objects.values_list("pk", flat=True)) == [job_id]
    assert woken == [job_id]
    assert IdempotencyKey.objects.get().job_id == job_id
    assert "checking its commit" in caplog.text
    again = start()
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 1


# --- A pool whose idle connections were all dropped -----------------------------------


def test_a_pool_whose_idle_connections_were_all_dropped_hands_out_a_live_one_soon(settings):
    """psycopg_pool checks each connection it hands out, but waits 1, 2, 4 ... s between
    two dead ones: a pool holding only dead ones, met one by one, gives none within its
    timeout. ``core.db`` checks the idle ones every ``DB_POOL_CHECK_SECONDS``."""
    pool = connection.pool
    timeout = settings.DATABASES["default"]["OPTIONS"]["pool"]["timeout"]
    short_route.give_back_connections()  # kept by its threads since earlier tests
    connection.ensure_connection()  # the suite's own, kept out of the pool meanwhile
    idle = [pool.getconn() for _ in range(pool.max_size - 1)]
    pids = [conn.info.backend_pid for conn in idle]
    for conn in idle:
        pool.putconn(conn)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM unnest(%s) AS pid", [pids])
        assert cursor.fetchone()[0] == len(pids)
        while True:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.01)

    def statement_in_a_new_thread() -> float:
        started = time.monotonic()
        other = connections["default"]  # this thread's: taken from the pool
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                assert cursor.fetchone()[0] not in pids
        finally:
            other.close()
        return time.monotonic() - started

    from tests.factories import InThread

    elapsed = InThread(statement_in_a_new_thread).join()
    assert elapsed < timeout / 2, elapsed


# --- The short route's shared threads keep their connections (gateway.dbthread) ---------


def backend_pid_and_key(plain: str):
    """Statements of one request's step: the key read, and which connection ran it."""
    api_key = services.api_key_authenticate(plain)
    return connection.connection.info.backend_pid if connection.connection else None, api_key


@pytest.fixture
def shared_thread() -> Iterator:
    """Runs ``in_thread`` work on one thread marked as the short route marks its four."""
    executor = ThreadPoolExecutor(1, initializer=keep_connections, initargs=(4,))

    def run(func, *args):
        async def step():
            async with ThreadSensitiveContext(executor=executor):
                return await in_thread(func, *args)

        return asyncio.run(step())

    yield run
    executor.submit(release_connections).result()  # before the test database is dropped
    executor.shutdown()


def held_pid() -> int | None:
    """The server process of the connection this thread holds as a step starts, if any."""
    return connection.connection.info.backend_pid if connection.connection else None


def test_a_shared_thread_keeps_its_connection_and_replaces_one_the_server_dropped(
    make_key, shared_thread
):
    api_key, plain = make_key()
    first, read = shared_thread(backend_pid_and_key, plain)
    assert read == api_key and first is not None
    assert shared_thread(held_pid) == first  # kept from the step before, not given back
    terminate_and_wait(first)
    third, read = shared_thread(backend_pid_and_key, plain)
    assert read == api_key and third not in (None, first)  # run again on a new one


def test_a_shared_thread_gives_its_connection_back_when_the_pool_is_too_small_to_keep_it(
    make_key, shared_thread, monkeypatch
):
    monkeypatch.setitem(connections.settings["default"]["OPTIONS"]["pool"], "max_size", 7)
    _, plain = make_key()
    shared_thread(backend_pid_and_key, plain)
    assert shared_thread(held_pid) is None  # given back: 7 < twice the 4 shared threads
