"""Hostile input is a 4xx in the envelope, never a 500: over-deep JSON, non-finite numbers,
NUL characters and unpaired surrogates in bodies, headers and URL ids, oversized numbers.
(tests/test_fuzz.py feeds arbitrary input to every endpoint.)"""

import json

import pytest

from agents.models import Job
from conversations.models import Conversation
from core.http import MAX_JSON_DEPTH
from gateway.models import UsageRecord
from tests.envelope import assert_error

pytestmark = pytest.mark.django_db

NUL = "\x00"
SURROGATE = "\ud800"


def post_raw(client, path: str, raw: str | bytes, **extra):
    return client.post(path, data=raw, content_type="application/json", **extra)


def nested(depth: int) -> str:
    """A JSON array ``depth`` levels deep."""
    return "[" * depth + "]" * depth


def llm_body_nested(api_key: str, depth: int) -> bytes:
    """An /api.php body ``depth`` levels deep: itself, ``options``, then an array in it."""
    return dumps(llm_body(api_key))[:-1] + f', "options": {{"x": {nested(depth - 2)}}}}}'.encode()


def llm_body(api_key: str, **fields) -> dict:
    return {"api_key": api_key, "model": "test-model", "prompt": "Hi", **fields}


def chat_body(**fields) -> dict:
    return {"source": "web", "scope_type": "user", "scope_id": "42", "prompt": "Hi", **fields}


def job_body(**fields) -> dict:
    return {"source": "web", "scope_type": "user", "scope_id": "42", "task": "Add", **fields}


def dumps(body: dict) -> bytes:
    """JSON as a client would send it, lone surrogates and all."""
    return json.dumps(body).encode("utf-8", "surrogatepass")


# --- Depth ----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 100_000])
def test_api_php_refuses_json_nested_too_deep(api_client, api_key, runtime, depth):
    response = post_raw(api_client, "/api.php", llm_body_nested(api_key, depth))
    body = assert_error(response, 400, "invalid_json")
    assert body["details"] == {"max_depth": MAX_JSON_DEPTH}
    assert str(MAX_JSON_DEPTH) in body["message"]
    assert runtime.generate_requests() == []


@pytest.mark.parametrize("path", ["/agent/chat", "/agent/job/start"])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 100_000])
def test_the_agent_api_refuses_json_nested_too_deep(agent_client, path, depth):
    response = post_raw(agent_client, path, nested(depth))
    assert assert_error(response, 400, "invalid_json")["details"] == {"max_depth": MAX_JSON_DEPTH}
    assert not Job.objects.exists()


def test_json_nested_to_the_limit_is_accepted(api_client, api_key, runtime):
    response = post_raw(api_client, "/api.php", llm_body_nested(api_key, MAX_JSON_DEPTH))
    assert response.status_code == 200, response.content


# --- Numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_api_php_refuses_nan_and_infinity_anywhere(api_client, api_key, runtime, literal):
    for raw in (
        f'{{"api_key": "{api_key}", "model": "test-model", "prompt": "Hi", '
        f'"options": {{"temperature": {literal}}}}}',
        f'{{"api_key": "{api_key}", "model": "test-model", "prompt": "Hi", "x": [{literal}]}}',
    ):
        body = assert_error(post_raw(api_client, "/api.php", raw), 400, "invalid_json")
        assert literal in body["message"]
    assert runtime.generate_requests() == []
    assert not UsageRecord.objects.exists()


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_the_agent_api_refuses_nan_and_infinity(agent_client, literal):
    raw = f'{{"source": "web", "scope_type": "user", "scope_id": {literal}, "prompt": "Hi"}}'
    assert_error(post_raw(agent_client, "/agent/chat", raw), 400, "invalid_json")


def test_a_number_too_large_for_a_double_is_a_validation_error(api_client, api_key, runtime):
    raw = dumps(llm_body(api_key))[:-1] + b', "options": {"temperature": 1e400}}'
    body = assert_error(post_raw(api_client, "/api.php", raw), 400, "validation_error")
    assert body["details"]["fields"] == {"options.temperature": ["Must be a finite number."]}
    assert runtime.generate_requests() == []


def test_an_integer_too_long_to_read_is_refused_without_python_internals(agent_client):
    raw = '{"source": "web", "scope_type": "user", "prompt": "Hi", "scope_id": ' + "9" * 5000 + "}"
    body = assert_error(post_raw(agent_client, "/agent/chat", raw), 400, "invalid_json")
    text = json.dumps(body)
    assert "sys." not in text and "set_int_max_str_digits" not in text
    assert body["message"] == "A number in the request body has too many digits."


def test_malformed_json_is_described_in_json_terms(api_client, runtime):
    body = assert_error(post_raw(api_client, "/api.php", '{"model": '), 400, "invalid_json")
    assert body["details"] == {"reason": "Expecting value", "line": 1, "column": 11}


# --- NUL characters and unpaired surrogates in bodies ---------------------------------------


@pytest.mark.parametrize("bad", [NUL, SURROGATE, "\udfff", f"ok{NUL}ok"])
@pytest.mark.parametrize("field", ["source", "scope_type", "scope_id", "prompt", "profile"])
def test_chat_refuses_nul_and_unpaired_surrogates_in_any_field(agent_client, field, bad):
    response = post_raw(agent_client, "/agent/chat", dumps(chat_body(**{field: bad})))
    body = assert_error(response, 400, "validation_error")
    assert list(body["details"]["fields"]) == [field]
    assert not Job.objects.exists() and not Conversation.objects.exists()


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
@pytest.mark.parametrize("field", ["source", "scope_type", "scope_id", "task"])
def test_job_start_refuses_nul_and_unpaired_surrogates_in_any_field(agent_client, field, bad):
    response = post_raw(agent_client, "/agent/job/start", dumps(job_body(**{field: bad})))
    body = assert_error(response, 400, "validation_error")
    assert list(body["details"]["fields"]) == [field]
    assert not Job.objects.exists()


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
def test_a_bad_key_name_is_reported_without_echoing_it(agent_client, bad):
    response = post_raw(agent_client, "/agent/chat", dumps(chat_body(**{f"x{bad}": 1})))
    body = assert_error(response, 400, "validation_error")
    assert body["details"]["fields"] == {
        "non_field_errors": ["Must not contain NUL characters or unpaired surrogates."]
    }


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"prompt": "Hi {bad}"}, "prompt"),
        ({"model": "{bad}"}, "model"),
        ({"options": {"stop": ["\n", "{bad}"]}}, "options.stop.1"),
        ({"options": {"extra": {"deep": "{bad}"}}}, "options.extra.deep"),
    ],
)
def test_api_php_refuses_nul_and_unpaired_surrogates_anywhere(
    api_client, api_key, runtime, bad, fields, path
):
    raw = dumps(llm_body(api_key, **fields)).replace(b"{bad}", json.dumps(bad)[1:-1].encode())
    response = post_raw(api_client, "/api.php", raw)
    assert assert_error(response, 400, "validation_error")["details"]["fields"] == {
        path: ["Must not contain NUL characters or unpaired surrogates."]
    }
    assert runtime.generate_requests() == []


def test_api_php_still_checks_the_key_before_the_fields(api_client, runtime):
    response = post_raw(api_client, "/api.php", dumps(llm_body("nope", prompt=NUL)))
    assert_error(response, 401, "invalid_api_key")


# --- Keys in headers and bodies -------------------------------------------------------------


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
def test_a_key_holding_nul_or_a_surrogate_is_401(api_client, api_key, runtime, bad):
    forged = api_key[:10] + bad + api_key[11:]
    response = post_raw(api_client, "/api.php", dumps(llm_body(forged)))
    assert_error(response, 401, "invalid_api_key")
    assert_error(
        api_client.get("/agent/job/x", HTTP_AUTHORIZATION=f"Bearer {forged}"),
        401,
        "invalid_api_key",
    )
    assert_error(api_client.get("/agent/job/x", HTTP_X_API_KEY=forged), 401, "invalid_api_key")


# --- URL ids --------------------------------------------------------------------------------


@pytest.mark.parametrize("job_id", ["%00", "job_%00", "%ED%A0%80", "job_" + "A" * 500, "job_'"])
def test_a_job_id_that_cannot_exist_is_404(agent_client, job_id):
    assert_error(agent_client.get(f"/agent/job/{job_id}"), 404, "job_not_found")
    assert_error(agent_client.post(f"/agent/job/{job_id}/cancel"), 404, "job_not_found")


@pytest.mark.parametrize("conversation_id", ["%00", "conv_%00", "%ED%A0%80", "conv_x"])
def test_a_conversation_id_that_cannot_exist_is_404(agent_client, conversation_id):
    response = agent_client.get(f"/agent/conversation/{conversation_id}")
    assert_error(response, 404, "conversation_not_found")


@pytest.mark.parametrize("query", ["limit=%00", "before=%00", "limit=1e400", "before=NaN"])
def test_bad_paging_values_are_validation_errors(agent_client, query):
    response = agent_client.post("/agent/chat", chat_body(), format="json")
    conversation_id = response.json()["data"]["conversation_id"]
    response = agent_client.get(f"/agent/conversation/{conversation_id}?{query}")
    assert_error(response, 400, "validation_error")


# --- Messages -------------------------------------------------------------------------------


def test_the_scope_error_names_the_scope_plainly(api_client, make_key, runtime):
    _, plain = make_key(scopes=("agent",))
    body = assert_error(post_raw(api_client, "/api.php", dumps(llm_body(plain))), 403, "forbidden")
    assert body["message"] == 'This key does not have the "model" scope.'
    assert body["details"] == {"required_scope": "model"}


# --- The admin's URLs -----------------------------------------------------------------------


@pytest.fixture
def static_files(settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        ("/admin/agents/job/%00/change/", 404, "not_found"),
        ("/admin/conversations/conversation/%00/change/", 404, "not_found"),
        ("/admin/agents/job/?q=%00", 400, "bad_request"),
        ("/admin/gateway/apikey/?q=a%00b", 400, "bad_request"),
        ("/admin/agents/job/?status__exact=%00", 400, "bad_request"),
    ],
)
def test_a_nul_in_an_admin_url_is_refused_before_the_database(
    admin_client, static_files, path, status, error
):
    assert_error(admin_client.get(path), status, error)


def test_the_admin_search_still_works(admin_client, static_files):
    assert admin_client.get("/admin/agents/job/?q=job_").status_code == 200


# --- What a model answers is stored, whatever it holds -----------------------------------


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["NUL", "surrogate"])
def test_a_model_reply_holding_nul_or_a_surrogate_is_stored_with_a_replacement_character(
    agent_client, runtime, sync_queue, django_capture_on_commit_callbacks, bad
):
    from agents.models import JobStatus, Step
    from conversations.models import Message

    runtime.script = lambda prompt, body: f"Hello{bad} world"
    with django_capture_on_commit_callbacks(execute=True):
        answer = agent_client.post(
            "/agent/chat",
            {"source": "t", "scope_type": "s", "scope_id": "1", "prompt": "Hi"},
            format="json",
        )
    job = Job.objects.get(pk=answer.json()["data"]["job_id"])
    assert job.status == JobStatus.FINISHED, job.error
    assert Message.objects.get(job=job, role="assistant").content == "Hello\ufffd world"
    assert Step.objects.get(job=job, kind="model_call").output["text"] == "Hello\ufffd world"
    tokens = job.events.filter(type="token").order_by("seq")
    assert "".join(event.data["text"] for event in tokens) == "Hello\ufffd world"
