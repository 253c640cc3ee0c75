"""Every endpoint's real answers, success and error, match the generated OpenAPI schema.

The schema is made stricter for the check (no undocumented fields in any object), and each
test exercises every status its operation documents except 500: a drift either way, an
undocumented field or status, or a documented status that never happens, fails here. (A
method an endpoint lacks, 405, is no operation of the schema: those answers are checked to
be the envelope.)
"""

import json

import pytest
from django.core.management import call_command
from django.db import connection
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse
from rest_framework.test import APIClient

from agents import idempotency
from agents import services as jobs
from agents.models import JobStatus
from conversations import services as conversations
from gateway import health
from tests.envelope import assert_error
from tests.factories import default_profile, key_in_flight, make_job
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db

# Not reproducible here: 500 without breaking the service on purpose; 503 ``server_busy``
# comes from the web server in front of Django (tests/test_inflight.py checks that one).
UNEXERCISED = {"408", "500", "503"}  # the server's own: tests/test_slow_clients.py


def strict(node):
    """The schema with ``additionalProperties: false`` on every object that lists its
    properties and says nothing about others."""
    if isinstance(node, dict):
        node = {key: strict(value) for key, value in node.items()}
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [strict(value) for value in node]
    return node


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("schema") / "openapi.json"
    call_command("spectacular", "--format=openapi-json", f"--file={path}")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def openapi(schema) -> OpenAPI:
    return OpenAPI.from_dict(strict(schema))


class Checker:
    """Validates answers of one operation and remembers their statuses."""

    def __init__(self, openapi: OpenAPI, schema: dict, path: str, method: str):
        self.openapi = openapi
        self.documented = set(schema["paths"][path][method]["responses"])
        self.seen: set[str] = set()
        # Statuses that only PostgreSQL can answer here: SQLite runs one write transaction
        # at a time, so a repeat with an Idempotency-Key waits for the first and replays it.
        self.only_on_postgresql: set[str] = set()

    def __call__(self, response, status: int, error: str | None = None):
        assert response.status_code == status, response.content
        self.openapi.validate_response(
            DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
        )
        body = response.json()
        if error is not None:
            assert body["error"] == error, body
        self.seen.add(str(status))
        return body

    def assert_all_exercised(self) -> None:
        unexercised = UNEXERCISED
        if self.only_on_postgresql and connection.vendor != "postgresql":
            unexercised = unexercised | self.only_on_postgresql
        assert self.documented - unexercised <= self.seen <= self.documented


@pytest.fixture
def check(openapi, schema):
    checkers: list[Checker] = []

    def make(path: str, method: str) -> Checker:
        checker = Checker(openapi, schema, path, method)
        checkers.append(checker)
        return checker

    yield make
    for checker in checkers:
        checker.assert_all_exercised()


@pytest.fixture
def small_bodies(settings):
    settings.MAX_BODY_BYTES = 2048
    return "x" * 4096


def bearer(plain: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    return client


def test_the_model_endpoint_answers_as_documented(
    check, runtime, make_key, api_client, small_bodies, settings
):
    ok = check("/api.php", "post")
    _, plain = make_key()
    _, model_only_for_other = make_key(name="narrow", allowed_models=["other-model"])
    _, agent_only = make_key(name="agent-only", scopes=["agent"])
    _, limited = make_key(name="limited", rate_limit_per_minute=1)

    def call(key=plain, **fields):
        body = {"api_key": key, "model": "test-model", "prompt": "hi", **fields}
        return api_client.post("/api.php", body, format="json")

    body = ok(call(), 200)
    assert body["usage"] == {"prompt_tokens": 1, "completion_tokens": 2}
    ok(api_client.post("/api.php", "{", content_type="application/json"), 400, "invalid_json")
    ok(call(prompt=7), 400, "validation_error")
    ok(call(model="nobody-has-this"), 400, "unknown_model")
    runtime.context_length = 3
    ok(call(prompt="one two three four"), 400, "context_length_exceeded")
    runtime.context_length = None
    runtime.script = lambda prompt, body: Reply(status=422, error="no")
    ok(call(), 400, "runtime_rejected")
    ok(call(key="llmgw_nope"), 401, "invalid_api_key")
    ok(call(key=agent_only), 403, "forbidden")
    ok(call(key=model_only_for_other), 403, "model_not_allowed")
    assert_error(api_client.get("/api.php"), 405, "method_not_allowed")
    ok(api_client.post("/api.php", small_bodies, content_type="application/json"), 413)
    call(key=limited)
    ok(call(key=limited), 429, "rate_limited")
    runtime.script = lambda prompt, body: Reply(status=500, error="it broke")
    ok(call(), 502, "runtime_error")
    runtime.script = lambda prompt, body: Reply(status=503, error="busy")
    ok(call(), 503, "runtime_busy")
    settings.RUNTIME_READ_TIMEOUT = 0.2
    runtime.script = lambda prompt, body: Reply(delay=2)
    ok(call(), 504, "runtime_timeout")
    runtime.stop()
    try:
        ok(call(), 502, "runtime_unavailable")
    finally:
        runtime.start()


def test_job_start_answers_as_documented(check, make_key, api_client, small_bodies, monkeypatch):
    ok = check("/agent/job/start", "post")
    api_key, plain = make_key()
    owner_id = api_key.owner_id
    _, model_only = make_key(name="model-only", scopes=["model"])
    client = bearer(plain)
    fields = {"source": "s", "scope_type": "t", "scope_id": 1, "task": "do it"}

    body = ok(client.post("/agent/job/start", fields, format="json"), 200)
    assert body["data"]["status"] == JobStatus.QUEUED
    bad = client.post("/agent/job/start", "{", content_type="application/json")
    ok(bad, 400, "invalid_json")
    ok(client.post("/agent/job/start", {**fields, "x": 1}, format="json"), 400)
    ok(client.post("/agent/job/start", {**fields, "profile": "nope"}, format="json"), 400)
    ok(api_client.post("/agent/job/start", fields, format="json"), 401, "invalid_api_key")
    ok(bearer(model_only).post("/agent/job/start", fields, format="json"), 403, "forbidden")
    assert_error(client.get("/agent/job/start"), 405, "method_not_allowed")
    big = client.post("/agent/job/start", small_bodies, content_type="application/json")
    ok(big, 413, "payload_too_large")
    plain_text = client.post("/agent/job/start", "hi", content_type="text/plain")
    ok(plain_text, 415, "unsupported_media_type")
    ok(client.post("/agent/job/start", {**fields, "task": "x" * 40_000}, format="json"), 413)
    one_a_minute = bearer(make_key(name="slow", agent_starts_per_minute=1)[1])
    one_a_minute.post("/agent/job/start", fields, format="json")
    ok(one_a_minute.post("/agent/job/start", fields, format="json"), 429, "rate_limited")
    one_at_a_time = bearer(make_key(name="single", max_active_jobs=1)[1])
    one_at_a_time.post("/agent/job/start", fields, format="json")
    ok(one_at_a_time.post("/agent/job/start", fields, format="json"), 429, "too_many_jobs")
    key = {"HTTP_IDEMPOTENCY_KEY": "k"}
    ok(client.post("/agent/job/start", fields, format="json", **key), 200)
    again = client.post("/agent/job/start", {**fields, "task": "other"}, format="json", **key)
    ok(again, 422, "idempotency_key_reused")
    bad_key = {"HTTP_IDEMPOTENCY_KEY": ""}
    ok(client.post("/agent/job/start", fields, format="json", **bad_key), 400)
    private = {**fields, "webhook": "http://127.0.0.1/hook"}
    ok(client.post("/agent/job/start", private, format="json"), 400, "invalid_webhook_url")
    ok.only_on_postgresql = {"409"}
    if connection.vendor == "postgresql":
        monkeypatch.setattr(idempotency, "WAIT_SECONDS", 0.2)
        with key_in_flight(owner_id, "held"):
            held = {"HTTP_IDEMPOTENCY_KEY": "held"}
            answer = client.post("/agent/job/start", fields, format="json", **held)
        assert answer["Retry-After"] == "1"
        ok(answer, 409, "idempotency_in_progress")


def test_job_status_answers_as_documented(check, make_key, api_client, small_bodies):
    ok = check("/agent/job/{job_id}", "get")
    api_key, plain = make_key()
    _, model_only = make_key(name="model-only", scopes=["model"])
    client = bearer(plain)
    job = make_job(api_key)
    url = f"/agent/job/{job.pk}"

    assert ok(client.get(url), 200)["data"]["job_id"] == job.pk
    token = "w"
    claimed = jobs.job_claim(job.pk, token=token)
    result = {"text": "done", "answered_by": "model", "verified": False}
    jobs.job_finish(claimed, token=token, final_result=result)
    data = ok(client.get(url), 200)["data"]
    assert data["final_result"] == result
    failed = make_job(api_key, status=JobStatus.FAILED, error="it went wrong")
    assert ok(client.get(f"/agent/job/{failed.pk}"), 200)["data"]["error"]
    ok(api_client.get(url), 401, "invalid_api_key")
    ok(bearer(model_only).get(url), 403, "forbidden")
    ok(client.get("/agent/job/job_nothing"), 404, "job_not_found")
    assert_error(client.post(url), 405, "method_not_allowed")
    big = client.generic("GET", url, small_bodies, content_type="application/json")
    ok(big, 413, "payload_too_large")
    one_a_minute = bearer(make_key(name="slow", agent_reads_per_minute=1)[1])
    one_a_minute.get(url)
    ok(one_a_minute.get(url), 429, "rate_limited")


def test_job_cancel_answers_as_documented(check, make_key, api_client, small_bodies):
    ok = check("/agent/job/{job_id}/cancel", "post")
    api_key, plain = make_key()
    _, model_only = make_key(name="model-only", scopes=["model"])
    client = bearer(plain)

    queued = make_job(api_key)
    body = ok(client.post(f"/agent/job/{queued.pk}/cancel"), 200)
    assert body["data"]["status"] == JobStatus.CANCELLED
    running = jobs.job_claim(make_job(api_key).pk, token="w")
    body = ok(client.post(f"/agent/job/{running.pk}/cancel"), 200)
    assert body["data"]["status"] == JobStatus.CANCELLING
    finished = make_job(api_key, status=JobStatus.FINISHED)
    conflict = ok(client.post(f"/agent/job/{finished.pk}/cancel"), 409, "job_not_cancellable")
    assert conflict["details"]["status"] == JobStatus.FINISHED
    url = f"/agent/job/{queued.pk}/cancel"
    ok(api_client.post(url), 401, "invalid_api_key")
    ok(bearer(model_only).post(url), 403, "forbidden")
    ok(client.post("/agent/job/job_nothing/cancel"), 404, "job_not_found")
    assert_error(client.get(url), 405, "method_not_allowed")
    ok(client.post(url, small_bodies, content_type="application/json"), 413)
    one_a_minute = bearer(make_key(name="slow", agent_starts_per_minute=1)[1])
    one_a_minute.post(url)
    ok(one_a_minute.post(url), 429, "rate_limited")
    key = {"HTTP_IDEMPOTENCY_KEY": "k"}
    ok(client.post(f"/agent/job/{make_job(api_key).pk}/cancel", **key), 200)
    ok(client.post(f"/agent/job/{make_job(api_key).pk}/cancel", **key), 422)
    bad_key = {"HTTP_IDEMPOTENCY_KEY": "\u00e9"}
    ok(client.post(f"/agent/job/{make_job(api_key).pk}/cancel", **bad_key), 400)


def test_chat_answers_as_documented(check, runtime, make_key, api_client, small_bodies, settings):
    ok = check("/agent/chat", "post")
    _, plain = make_key()
    _, model_only = make_key(name="model-only", scopes=["model"])
    client = bearer(plain)
    fields = {"source": "s", "scope_type": "t", "scope_id": "a", "prompt": "hello"}

    body = ok(client.post("/agent/chat", fields, format="json"), 200)
    assert body["data"]["conversation_id"].startswith("conv_")
    ok(client.post("/agent/chat", "{", content_type="application/json"), 400, "invalid_json")
    huge = {**fields, "prompt": "word " * 200_000}
    settings.MAX_BODY_BYTES = settings.AGENT_PROMPT_MAX_CHARS = 2**21
    ok(client.post("/agent/chat", huge, format="json"), 400, "validation_error")
    settings.AGENT_PROMPT_MAX_CHARS = 1000
    ok(client.post("/agent/chat", {**fields, "prompt": "x" * 1001}, format="json"), 413)
    settings.MAX_BODY_BYTES = len(small_bodies) // 2
    ok(client.post("/agent/chat", {**fields, "profile": "nope"}, format="json"), 400)
    ok(api_client.post("/agent/chat", fields, format="json"), 401, "invalid_api_key")
    ok(bearer(model_only).post("/agent/chat", fields, format="json"), 403, "forbidden")
    assert_error(client.get("/agent/chat"), 405, "method_not_allowed")
    ok(client.post("/agent/chat", small_bodies, content_type="application/json"), 413)
    ok(client.post("/agent/chat", "hi", content_type="text/plain"), 415)
    one_a_minute = bearer(make_key(name="slow", agent_starts_per_minute=1)[1])
    one_a_minute.post("/agent/chat", fields, format="json")
    ok(one_a_minute.post("/agent/chat", fields, format="json"), 429, "rate_limited")
    one_at_a_time = bearer(make_key(name="single", max_active_jobs=1)[1])
    one_at_a_time.post("/agent/chat", {**fields, "scope_id": "b"}, format="json")
    busy = one_at_a_time.post("/agent/chat", {**fields, "scope_id": "c"}, format="json")
    ok(busy, 429, "too_many_jobs")
    refused = client.post("/agent/chat", {**fields, "on_busy": "reject"}, format="json")
    ok(refused, 409, "conversation_busy")
    private = {**fields, "webhook": "http://10.0.0.1/hook"}
    ok(client.post("/agent/chat", private, format="json"), 400, "invalid_webhook_url")
    key = {"HTTP_IDEMPOTENCY_KEY": "k"}
    ok(client.post("/agent/chat", {**fields, "scope_id": "k"}, format="json", **key), 200)
    ok(client.post("/agent/chat", fields, format="json", **key), 422, "idempotency_key_reused")


@pytest.mark.parametrize(
    ("path", "method", "limit"),
    [
        ("/agent/webhooks/secret", "get", "agent_reads_per_minute"),
        ("/agent/webhooks/secret/rotate", "post", "agent_starts_per_minute"),
    ],
)
def test_the_webhook_secret_answers_as_documented(
    check, make_key, api_client, small_bodies, path, method, limit
):
    ok = check(path, method)
    _, plain = make_key()
    _, model_only = make_key(name="model-only", scopes=["model"])
    client = bearer(plain)

    body = ok(getattr(client, method)(path), 200)
    assert body["data"]["secret"].startswith("whsec_")
    ok(getattr(api_client, method)(path), 401, "invalid_api_key")
    ok(getattr(bearer(model_only), method)(path), 403, "forbidden")
    other = "post" if method == "get" else "get"
    assert_error(getattr(client, other)(path), 405, "method_not_allowed")
    big = client.generic(method.upper(), path, small_bodies, content_type="application/json")
    ok(big, 413, "payload_too_large")
    one_a_minute = bearer(make_key(name="slow", **{limit: 1})[1])
    getattr(one_a_minute, method)(path)
    ok(getattr(one_a_minute, method)(path), 429, "rate_limited")


def test_conversation_answers_as_documented(check, make_key, api_client, small_bodies):
    ok = check("/agent/conversation/{conversation_id}", "get")
    api_key, plain = make_key()
    _, model_only = make_key(name="model-only", scopes=["model"])
    client = bearer(plain)
    conversation = conversations.conversation_get_or_create(
        owner_id=api_key.owner_id,
        source="s",
        scope_type="t",
        scope_id="a",
        profile=default_profile(),
    )
    conversations.messages_import(
        conversation=conversation, messages=[("user", "hello"), ("assistant", "hi")]
    )
    url = f"/agent/conversation/{conversation.pk}"

    messages = ok(client.get(url), 200)["data"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert ok(client.get(url, {"limit": 1}), 200)["data"]["has_more"] is True
    ok(client.get(url, {"limit": 0}), 400, "validation_error")
    ok(api_client.get(url), 401, "invalid_api_key")
    ok(bearer(model_only).get(url), 403, "forbidden")
    ok(client.get("/agent/conversation/conv_nothing"), 404, "conversation_not_found")
    assert_error(client.post(url), 405, "method_not_allowed")
    ok(client.generic("GET", url, small_bodies, content_type="application/json"), 413)
    one_a_minute = bearer(make_key(name="slow", agent_reads_per_minute=1)[1])
    one_a_minute.get(url)
    ok(one_a_minute.get(url), 429, "rate_limited")


def test_the_health_endpoints_answer_as_documented(check, runtime, client, small_bodies):
    alive = check("/healthz", "get")
    ready = check("/readyz", "get")
    alive(client.get("/healthz"), 200)
    assert_error(client.post("/healthz"), 405, "method_not_allowed")
    alive(client.generic("GET", "/healthz", small_bodies, content_type="text/plain"), 413)
    assert ready(client.get("/readyz"), 200)["data"]["status"] == "ready"
    assert_error(client.post("/readyz"), 405, "method_not_allowed")
    ready(client.generic("GET", "/readyz", small_bodies, content_type="text/plain"), 413)
    runtime.stop()
    health.forget()  # a good answer is trusted for READYZ_CACHE_SECONDS
    try:
        ready(client.get("/readyz"), 503, "not_ready")
    finally:
        runtime.start()


def test_the_strict_schema_refuses_an_undocumented_field(openapi, runtime, make_key, api_client):
    """The check above would catch a view that sends more than its serializer says."""
    from openapi_core.validation.response.exceptions import DataValidationError

    _, plain = make_key()
    response = api_client.post(
        "/api.php", {"api_key": plain, "model": "test-model", "prompt": "hi"}, format="json"
    )
    response.content = json.dumps({**response.json(), "surprise": 1}).encode()
    with pytest.raises(DataValidationError):
        openapi.validate_response(
            DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
        )
