"""The usage row of every model call: what it stores, and its commit, which on PostgreSQL
does not wait for the disk (``USAGE_ASYNC_COMMIT``) and never covers another write."""

import contextlib

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.db import asynchronous_commit
from gateway import services
from gateway.models import UsageRecord
from tests.runtime_server import Reply

ASKED = "SET LOCAL synchronous_commit TO OFF"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["durable", "asynchronous commit"])
def test_a_model_call_writes_the_usage_row_the_orm_reads_back(
    runtime, settings, make_key, asynchronous
):
    settings.USAGE_ASYNC_COMMIT = asynchronous
    runtime.script = lambda prompt, body: Reply(text="an answer", completion_tokens=7)
    api_key, _ = make_key()
    before = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        services.model_call(api_key=api_key, model="test-model", prompt="abc")
    [record] = UsageRecord.objects.all()
    assert record.api_key_id == api_key.pk
    assert (record.origin, record.job_id, record.model) == ("api", "", "test-model")
    assert record.endpoint == "default"
    assert (record.status, record.error) == (200, "")
    assert 0 < record.elapsed < 5
    assert (record.prompt_chars, record.response_chars) == (3, len("an answer"))
    assert (record.prompt_tokens, record.completion_tokens) == (1, 7)
    assert before <= record.created_at <= timezone.now()
    asked = any(ASKED in query["sql"] for query in queries)
    assert asked == (asynchronous and connection.vendor == "postgresql")


@pytest.mark.django_db
@pytest.mark.parametrize("asynchronous", [False, True], ids=["durable", "asynchronous commit"])
def test_a_usage_row_is_held_to_the_database_constraints(make_key, asynchronous):
    api_key, _ = make_key()
    with (
        pytest.raises(IntegrityError),
        transaction.atomic(),
        asynchronous_commit() if asynchronous else contextlib.nullcontext(),
    ):
        UsageRecord.objects.create(api_key=api_key, model="m", status=-1, elapsed=0.1)


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "in a transaction"])
def test_an_asynchronous_commit_covers_no_other_statement(make_key, in_transaction):
    api_key, _ = make_key()
    with (
        transaction.atomic() if in_transaction else contextlib.nullcontext(),
        CaptureQueriesContext(connection) as queries,
    ):
        with asynchronous_commit():
            UsageRecord.objects.create(api_key=api_key, model="m", status=200, elapsed=0.1)
        if connection.vendor == "postgresql":
            assert synchronous_commit() == "on"
    asked = any(ASKED in query["sql"] for query in queries)
    assert asked == (connection.vendor == "postgresql" and not in_transaction)
    assert UsageRecord.objects.count() == 1
