"""The admin smoke test with query counts: every page opens with data present, and the number
of queries of a page does not grow with the number of rows it shows.

Each page is opened with a few rows, then with four times as many, and both counts are
compared. ``pytest -s`` prints the counts.
"""

from collections.abc import Callable

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db import connection, transaction
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import JobKind, JobStatus, StepKind
from conversations.models import Conversation, Message
from gateway.models import UsageRecord
from tests.factories import default_profile, make_job
from tests.test_admin import REGISTERED, make_object
from tests.test_backoffice import _step

pytestmark = pytest.mark.django_db

FEW, MANY = 2, 8


def _queries(client, url: str, method: str = "get", data: dict | None = None) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = getattr(client, method)(url, data or {})
    assert response.status_code == 200, (url, response.status_code)
    return len(captured)


def _same_count(client, url: str, add_rows: Callable[[int], None], label: str) -> int:
    add_rows(FEW)
    few = _queries(client, url)
    add_rows(MANY - FEW)
    many = _queries(client, url)
    print(f"QUERIES {label}: {few} with {FEW} rows, {many} with {MANY}")
    assert many == few, f"{label}: {few} queries with {FEW} rows, {many} with {MANY}"
    return many


def _maker(model) -> Callable[[], object] | None:
    try:
        with transaction.atomic():
            make_object(model)
    except Exception:
        return None  # no generic row for it: its list still opens in test_admin
    return lambda: make_object(model)


@pytest.mark.parametrize("model", REGISTERED, ids=lambda model: model._meta.label)
def test_a_list_costs_the_same_queries_whatever_the_rows(staff_client, superuser, model):
    info = (model._meta.app_label, model._meta.model_name)
    make = _maker(model)
    if make is None:
        pytest.fail(f"no row can be made for {model._meta.label}; add a FACTORIES entry")

    def add(n: int) -> None:
        for _ in range(n):
            make()

    _same_count(staff_client, reverse("admin:{}_{}_changelist".format(*info)), add, f"{info} list")

    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/admin/")
    request.user = superuser
    obj = model_admin.get_queryset(request).first()
    url = reverse("admin:{}_{}_change".format(*info), args=(quote(obj.pk),))
    print(f"QUERIES {info} change: {_queries(staff_client, url)}")
    if model_admin.has_add_permission(request):
        add_url = reverse("admin:{}_{}_add".format(*info))
        print(f"QUERIES {info} add: {_queries(staff_client, add_url)}")


def test_the_dashboard_costs_the_same_queries_whatever_the_rows(staff_client, make_key):
    keys = [make_key(name=f"k{n}")[0] for n in range(MANY)]

    def add(n: int) -> None:
        for api_key in keys[:n]:
            UsageRecord.objects.create(api_key=api_key, model="m", status=200, elapsed=0.2)
            make_job(api_key)

    _same_count(staff_client, reverse("admin:index"), add, "dashboard")


def test_a_job_page_costs_the_same_queries_whatever_its_steps(staff_client, make_key):
    job = make_job(make_key()[0], status=JobStatus.RUNNING)
    made = []

    def add(n: int) -> None:
        for _ in range(n):
            made.append(_step(job, len(made), input={"prompt": "a\nb"}))

    _same_count(staff_client, reverse("admin:agents_job_change", args=[job.pk]), add, "job page")


def test_a_transcript_costs_the_same_queries_whatever_its_messages(staff_client, make_key):
    api_key = make_key()[0]
    conversation = Conversation.objects.create(
        owner_id=api_key.owner_id,
        source="t",
        scope_type="s",
        scope_id="1",
        profile=default_profile(),
    )

    def add(n: int) -> None:
        for _ in range(n):
            seq = conversation.last_seq + 1
            job = make_job(
                api_key, kind=JobKind.CHAT, conversation=conversation, status=JobStatus.FINISHED
            )
            _step(job, 0, kind=StepKind.CONTEXT, output={"window_start": 1, "retrieved_seqs": []})
            for offset, role in enumerate(("user", "assistant")):
                Message.objects.create(
                    conversation=conversation, seq=seq + offset, role=role, content="x", job=job
                )
            conversation.last_seq = conversation.message_count = seq + 1
            conversation.save()

    url = reverse("admin:conversations_conversation_change", args=[conversation.pk])
    _same_count(staff_client, url, add, "transcript")


def test_the_playground_and_the_key_pages_open(staff_client, superuser, make_key, runtime):
    print(f"QUERIES playground: {_queries(staff_client, reverse('admin:playground'))}")
    keys = [make_key(name=f"r{n}")[0] for n in range(3)]
    confirmation = _queries(
        staff_client,
        reverse("admin:gateway_apikey_changelist"),
        "post",
        {"action": "revoke_selected", "_selected_action": [k.pk for k in keys]},
    )
    print(f"QUERIES revoke confirmation: {confirmation}")
