"""Idempotency-Key on POST /agent/job/start, /agent/chat and /agent/job/{id}/cancel."""

import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone
from rest_framework.request import ForcedAuthentication, Request
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory

from agents import idempotency
from agents.models import IdempotencyKey, Job
from conversations.models import Message
from core.exceptions import NotReady
from tests.envelope import assert_error
from tests.factories import default_profile

pytestmark = pytest.mark.django_db

START = "/agent/job/start"
CHAT = "/agent/chat"
TASK = {"source": "tests", "scope_type": "ticket", "scope_id": "T-1", "task": "Say hello."}
PROMPT = {"source": "tests", "scope_type": "ticket", "scope_id": "T-1", "prompt": "Hello"}


def post(client, path: str, body, key: str | None = "k-1"):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", **headers)


def client_of(plain: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    return client


def test_a_repeated_start_replays_the_first_answer_byte_for_byte_and_starts_nothing(agent_client):
    first = post(agent_client, START, TASK)
    assert first.status_code == 200
    assert "Idempotent-Replayed" not in first
    again = post(agent_client, START, TASK)
    assert again.status_code == 200
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert again["Content-Type"] == "application/json"
    assert Job.objects.count() == 1


def test_the_same_json_written_otherwise_is_the_same_request(agent_client):
    first = post(agent_client, START, TASK)
    reordered = json.dumps(dict(reversed(list(TASK.items()))), indent=2)
    again = post(agent_client, START, reordered)
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"


def test_a_repeated_chat_stores_its_message_once(agent_client):
    first = post(agent_client, CHAT, PROMPT)
    again = post(agent_client, CHAT, PROMPT)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert Message.objects.filter(content="Hello").count() == 1
    assert Job.objects.count() == 1


def test_a_repeated_cancel_replays_its_first_answer(agent_client):
    job_id = post(agent_client, START, TASK, key=None).json()["data"]["job_id"]
    path = f"/agent/job/{job_id}/cancel"
    first = client_post_empty(agent_client, path, "c-1")
    assert first.json()["data"]["status"] == "cancelled"
    again = client_post_empty(agent_client, path, "c-1")
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"


def client_post_empty(client, path: str, key: str):
    return client.post(path, HTTP_IDEMPOTENCY_KEY=key)


def test_the_same_key_with_another_body_is_refused(agent_client):
    post(agent_client, START, TASK)
    body = assert_error(
        post(agent_client, START, {**TASK, "task": "Other."}), 422, "idempotency_key_reused"
    )
    assert body["details"]["idempotency_key"] == "k-1"
    assert_error(post(agent_client, CHAT, PROMPT), 422, "idempotency_key_reused")
    assert Job.objects.count() == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_key_that_is_not_1_to_255_printable_ascii_characters_is_refused(agent_client, key):
    body = assert_error(post(agent_client, START, TASK, key=key), 400, "validation_error")
    assert "Idempotency-Key" in body["details"]["fields"]
    assert Job.objects.count() == 0


def test_a_key_of_255_printable_characters_is_taken(agent_client):
    assert post(agent_client, START, TASK, key=" " + "~" * 254).status_code == 200


def test_keys_of_other_owners_never_meet(agent_client, make_key):
    _, other = make_key(name="other")
    first = post(agent_client, START, TASK)
    second = post(client_of(other), START, TASK)
    assert second.status_code == 200
    assert "Idempotent-Replayed" not in second
    assert second.json()["data"]["job_id"] != first.json()["data"]["job_id"]
    assert Job.objects.count() == 2


def test_an_error_answer_is_stored_and_replayed(agent_client):
    first = assert_error(
        post(agent_client, START, {**TASK, "profile": "later"}), 400, "unknown_profile"
    )
    profile = default_profile()
    profile.pk, profile.name = None, "later"
    profile.save()
    again = post(agent_client, START, {**TASK, "profile": "later"})
    assert again.status_code == 400
    assert again.json() == first
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 0


def test_a_server_error_is_not_stored_so_the_client_may_try_again(make_key):
    api_key, _ = make_key()
    request = APIRequestFactory().post(
        START, data=json.dumps(TASK), content_type="application/json", HTTP_IDEMPOTENCY_KEY="s-1"
    )
    request = Request(request, authenticators=[ForcedAuthentication(None, api_key)])

    def failing() -> idempotency.Done:
        Job.objects.create(**_job_fields(api_key))  # work done, then the failure
        raise NotReady()

    with pytest.raises(NotReady):
        idempotency.respond(request, failing)
    assert IdempotencyKey.objects.count() == 0
    assert Job.objects.count() == 0
    answer = idempotency.respond(request, lambda: idempotency.Done(Response({"ok": True})))
    assert answer.status_code == 200
    assert IdempotencyKey.objects.get().status_code == 200


def _job_fields(api_key) -> dict:
    return {
        "owner_id": api_key.owner_id,
        "api_key": api_key,
        "kind": "task",
        "source": "tests",
        "scope_type": "t",
        "scope_id": "1",
        "profile": default_profile(),
    }


def test_an_expired_key_names_a_new_request_and_prune_removes_expired_keys(agent_client):
    first = post(agent_client, START, TASK)
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    again = post(agent_client, START, TASK)
    assert "Idempotent-Replayed" not in again
    assert again.json()["data"]["job_id"] != first.json()["data"]["job_id"]
    assert IdempotencyKey.objects.count() == 1
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    post(agent_client, START, TASK, key="k-2")
    call_command("prune", "--older-than", "30", stdout=io.StringIO())
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["k-2"]


def test_the_key_lives_for_idempotency_ttl(agent_client, settings):
    settings.IDEMPOTENCY_TTL = 60
    before = timezone.now()
    post(agent_client, START, TASK)
    after = timezone.now()
    row = IdempotencyKey.objects.get()
    # Bounded by the call itself, however long a busy machine makes it take.
    assert before + timedelta(seconds=60) <= row.expires_at <= after + timedelta(seconds=60)


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_identical_requests_make_one_job(api_key):
    default_profile()
    gate = threading.Barrier(20)

    def one(_: int):
        try:
            gate.wait()
            return post(client_of(api_key), START, TASK, key="same")
        finally:
            connections.close_all()

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(one, range(20)))
    assert Job.objects.count() == 1
    job_id = Job.objects.get().pk
    for answer in answers:
        if answer.status_code == 409:  # waited past WAIT_SECONDS: told to try again
            assert_error(answer, 409, "idempotency_in_progress")
            assert answer["Retry-After"] == "1"
            continue
        assert answer.status_code == 200, answer.content
        assert answer.json()["data"]["job_id"] == job_id
    replayed = [a for a in answers if a.status_code == 200 and a.has_header("Idempotent-Replayed")]
    assert len(replayed) == sum(a.status_code == 200 for a in answers) - 1


def test_the_schema_documents_the_header_and_its_error_ids(client):
    schema = client.get("/api/schema/?format=json").json()
    for path in ("/agent/job/start", "/agent/chat", "/agent/job/{job_id}/cancel"):
        operation = schema["paths"][path]["post"]
        names = [p["name"] for p in operation["parameters"] if p["in"] == "header"]
        assert "Idempotency-Key" in names
        assert "Idempotent-Replayed" in operation["responses"]["200"]["headers"]
        ids = {
            status: _error_ids(schema, answer)
            for status, answer in operation["responses"].items()
            if status in ("409", "422")
        }
        assert "idempotency_in_progress" in ids["409"]
        assert ids["422"] == ["idempotency_key_reused"]


def _error_ids(schema: dict, answer: dict) -> list[str]:
    ref = answer["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    return schema["components"]["schemas"][ref]["properties"]["error"]["enum"]


def test_the_admin_lists_keys_read_only(staff_client, agent_client):
    post(agent_client, START, TASK)
    row = IdempotencyKey.objects.get()
    listing = staff_client.get("/admin/agents/idempotencykey/")
    assert listing.status_code == 200
    assert b"k-1" in listing.content
    page = staff_client.get(f"/admin/agents/idempotencykey/{row.pk}/change/")
    assert page.status_code == 200
    assert b'name="key"' not in page.content
    assert staff_client.get("/admin/agents/idempotencykey/add/").status_code == 403
