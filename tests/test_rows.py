"""gateway.rows: the usage write of every model call, as prepared SQL."""

import contextlib

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gateway import rows
from gateway.models import UsageRecord

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "asynchronous commit"])
def test_insert_writes_what_the_orm_reads_back(make_key, durable):
    api_key, _ = make_key()
    before = timezone.now()
    rows.insert(
        UsageRecord(
            api_key=api_key,
            model="m",
            endpoint="default",
            status=200,
            elapsed=0.125,
            prompt_chars=3,
            prompt_tokens=None,
            completion_tokens=7,
        ),
        durable=durable,
    )
    [record] = UsageRecord.objects.all()
    assert record.api_key_id == api_key.pk
    assert (record.origin, record.job_id, record.model) == ("api", "", "m")
    assert record.endpoint == "default"
    assert (record.status, record.error, record.elapsed) == (200, "", 0.125)
    assert (record.prompt_chars, record.response_chars) == (3, 0)
    assert (record.prompt_tokens, record.completion_tokens) == (None, 7)
    assert before <= record.created_at <= timezone.now()


def test_insert_is_held_to_the_database_constraints(make_key):
    api_key, _ = make_key()
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.insert(UsageRecord(api_key=api_key, model="m", status=-1, elapsed=0.1))


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
        rows.insert(UsageRecord(api_key=api_key, model="m", status=200, elapsed=0.1), durable=False)
        if connection.vendor == "postgresql":
            assert synchronous_commit() == "on"
    asked = "synchronous_commit', 'off'" in queries[0]["sql"]
    assert asked == (connection.vendor == "postgresql" and not in_transaction)
    assert UsageRecord.objects.count() == 1
