"""POST /api.php: the stateless model endpoint, against a real loopback runtime.

Every test runs twice: through the WSGI request path (Django's test client) and through the
ASGI one that the production server takes (Django's AsyncClient).
"""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from gateway import services
from gateway.models import ApiKey, UsageRecord
from tests.envelope import assert_error
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["wsgi", "asgi"])
def api_client(request):
    return request.getfixturevalue("asgi_client" if request.param == "asgi" else "api_client")


def call(client, body, **kwargs):
    return client.post("/api.php", data=json.dumps(body), content_type="application/json", **kwargs)


def test_it_forwards_exactly_the_prompt_and_returns_the_answer(api_client, api_key, runtime):
    runtime.script = lambda prompt, body: "Paris"
    prompt = "  The capital of France is\n"
    response = call(api_client, {"api_key": api_key, "model": "test-model", "prompt": prompt})
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["model"] == "test-model"
    assert body["response"] == "Paris"
    assert isinstance(body["elapsed"], float) and 0 <= body["elapsed"] < 5
    [sent] = runtime.generate_requests()
    assert sent.path == "/api/generate"
    assert sent.body == {"model": "test-model", "prompt": prompt, "stream": False}


def test_it_passes_options_unchanged_to_ollama(api_client, api_key, runtime):
    options = {
        "temperature": 0.2,
        "top_k": 5,
        "seed": 7,
        "num_predict": 9,
        "num_ctx": 512,
        "stop": ["\n"],
    }
    call(
        api_client, {"api_key": api_key, "model": "test-model", "prompt": "hi", "options": options}
    )
    [sent] = runtime.generate_requests()
    assert sent.body["options"] == options
    assert "context" not in sent.body


def test_it_maps_options_for_an_openai_runtime(api_client, api_key, runtime, settings):
    settings.MODEL_RUNTIME_API = "openai"
    response = call(
        api_client,
        {
            "api_key": api_key,
            "model": "test-model",
            "prompt": "hi",
            "options": {"num_predict": 9, "temperature": 0.1, "num_ctx": 512, "stop": ["x"]},
        },
    )
    assert response.status_code == 200
    assert response.json()["response"] == "echo: hi"
    [sent] = runtime.generate_requests()
    assert sent.path == "/v1/completions"
    assert sent.body == {
        "model": "test-model",
        "prompt": "hi",
        "stream": False,
        "max_tokens": 9,
        "temperature": 0.1,
        "stop": ["x"],
    }


def test_it_speaks_openai_chat_completions(api_client, api_key, runtime, settings):
    settings.MODEL_RUNTIME_API = "openai-chat"
    response = call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "hey"})
    assert response.json()["response"] == "echo: hey"
    [sent] = runtime.generate_requests()
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"] == [{"role": "user", "content": "hey"}]


def test_it_keeps_no_history_between_calls(api_client, api_key, runtime):
    for prompt in ("first", "second"):
        call(api_client, {"api_key": api_key, "model": "test-model", "prompt": prompt})
    assert runtime.prompts() == ["first", "second"]
    assert all("context" not in r.body for r in runtime.generate_requests())


def test_it_stores_no_prompt_or_response_text(api_client, api_key, runtime, django_db_blocker):
    from django.db import connection

    runtime.script = lambda prompt, body: "SECRET-ANSWER-77"
    call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "SECRET-PROMPT-42"})
    record = UsageRecord.objects.get()
    assert (record.status, record.prompt_chars, record.response_chars) == (200, 16, 16)
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')
            dump = repr(cursor.fetchall())
            assert "SECRET-PROMPT-42" not in dump, table
            assert "SECRET-ANSWER-77" not in dump, table


def test_it_records_token_counts_when_the_runtime_reports_them(api_client, api_key, runtime):
    runtime.script = lambda prompt, body: Reply(text="a b c", prompt_tokens=4, completion_tokens=3)
    response = call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "x"})
    assert response.json()["usage"] == {"prompt_tokens": 4, "completion_tokens": 3}
    record = UsageRecord.objects.get()
    assert (record.prompt_tokens, record.completion_tokens) == (4, 3)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("{not json", "application/json"),
        ('["a", "list"]', "application/json"),
        ('"a string"', "application/json"),
        ("null", "application/json"),
        ("", "application/json"),
        ("api_key=x&model=m&prompt=p", "application/x-www-form-urlencoded"),
        ('{"model": "m"}', "text/plain"),
        (b'{"prompt": "\xff"}', "application/json"),
    ],
)
def test_it_rejects_a_body_that_is_not_a_json_object(api_client, runtime, body, content_type):
    response = api_client.post("/api.php", data=body, content_type=content_type)
    assert_error(response, 400, "invalid_json")
    assert runtime.requests == []


def test_it_rejects_multipart_form_data(api_client, runtime):
    response = api_client.post("/api.php", data={"api_key": "x", "model": "m", "prompt": "p"})
    assert_error(response, 400, "invalid_json")


@pytest.mark.parametrize("key", [None, "", 123, ["x"], "nope", "llmgw_aaaaaaaaaaaa_" + "b" * 40])
def test_it_rejects_a_missing_or_unknown_key(api_client, runtime, db, key):
    body = {"model": "test-model", "prompt": "p"}
    if key is not None:
        body["api_key"] = key
    response = call(api_client, body)
    err = assert_error(response, 401, "invalid_api_key")
    assert "bbbbbbbb" not in json.dumps(err)
    assert runtime.requests == []


def test_it_rejects_a_key_whose_secret_is_wrong(api_client, runtime, make_key):
    _, plain = make_key()
    forged = plain[:-4] + ("AAAA" if not plain.endswith("AAAA") else "BBBB")
    assert_error(
        call(api_client, {"api_key": forged, "model": "test-model", "prompt": "p"}),
        401,
        "invalid_api_key",
    )


def test_it_rejects_a_revoked_key_on_the_very_next_request(api_client, runtime, make_key):
    key, plain = make_key()
    body = {"api_key": plain, "model": "test-model", "prompt": "p"}
    assert call(api_client, body).status_code == 200
    services.api_key_revoke(api_key=ApiKey.objects.get(pk=key.pk))
    assert_error(call(api_client, body), 401, "invalid_api_key")
    assert len(runtime.generate_requests()) == 1


def test_it_rejects_an_expired_key(api_client, runtime, make_key):
    _, plain = make_key(expires_at=timezone.now() - timedelta(seconds=1))
    assert_error(
        call(api_client, {"api_key": plain, "model": "test-model", "prompt": "p"}),
        401,
        "invalid_api_key",
    )


def test_it_accepts_a_key_that_has_not_expired_yet(api_client, runtime, make_key):
    _, plain = make_key(expires_at=timezone.now() + timedelta(hours=1))
    assert (
        call(api_client, {"api_key": plain, "model": "test-model", "prompt": "p"}).status_code
        == 200
    )


def test_it_checks_the_key_before_the_fields(api_client, runtime, db):
    assert_error(call(api_client, {"api_key": "bad", "model": 5}), 401, "invalid_api_key")


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"prompt": "p"}, "model"),
        ({"model": "test-model"}, "prompt"),
        ({"model": "", "prompt": "p"}, "model"),
        ({"model": "test-model", "prompt": ""}, "prompt"),
        ({"model": 7, "prompt": "p"}, "model"),
        ({"model": "test-model", "prompt": 7}, "prompt"),
        ({"model": "test-model", "prompt": ["p"]}, "prompt"),
        ({"model": None, "prompt": "p"}, "model"),
        ({"model": "test-model", "prompt": "p", "options": "hot"}, "options"),
        ({"model": "test-model", "prompt": "p", "options": [1]}, "options"),
        ({"model": "test-model", "prompt": "p", "options": None}, "options"),
    ],
)
def test_it_rejects_bad_fields_with_field_details(api_client, api_key, runtime, fields, bad):
    body = assert_error(call(api_client, {"api_key": api_key, **fields}), 400, "validation_error")
    assert bad in body["details"]["fields"]
    assert all(isinstance(m, str) for m in body["details"]["fields"][bad])
    assert runtime.requests == []


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete", "head", "options"])
def test_it_answers_405_to_every_other_method(api_client, runtime, method):
    response = getattr(api_client, method)("/api.php")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    if method != "head":
        assert_error(response, 405, "method_not_allowed")


def test_it_refuses_a_huge_body_with_413(api_client, api_key, runtime, settings):
    prompt = "x" * (settings.MAX_BODY_BYTES + 1)
    response = call(api_client, {"api_key": api_key, "model": "test-model", "prompt": prompt})
    body = assert_error(response, 413, "payload_too_large")
    assert body["details"]["max_bytes"] == settings.MAX_BODY_BYTES
    assert runtime.requests == []


def test_it_refuses_a_model_the_key_may_not_use(api_client, runtime, make_key):
    _, plain = make_key(allowed_models=["other-model"])
    body = assert_error(
        call(api_client, {"api_key": plain, "model": "test-model", "prompt": "p"}),
        403,
        "model_not_allowed",
    )
    assert body["details"]["model"] == "test-model"
    assert (
        call(api_client, {"api_key": plain, "model": "other-model", "prompt": "p"}).status_code
        == 200
    )
    assert runtime.prompts() == ["p"]


def test_it_refuses_a_key_without_the_model_scope(api_client, runtime, make_key):
    _, plain = make_key(scopes=["agent"])
    assert_error(
        call(api_client, {"api_key": plain, "model": "test-model", "prompt": "p"}), 403, "forbidden"
    )
    assert runtime.requests == []


def test_it_rate_limits_a_key_with_retry_after(api_client, runtime, make_key):
    _, plain = make_key(rate_limit_per_minute=2)
    body = {"api_key": plain, "model": "test-model", "prompt": "p"}
    assert [call(api_client, body).status_code for _ in range(2)] == [200, 200]
    response = call(api_client, body)
    err = assert_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert err["details"]["limit_per_minute"] == 2
    assert len(runtime.generate_requests()) == 2


def test_the_rate_limit_is_per_key(api_client, runtime, make_key):
    _, first = make_key("a", rate_limit_per_minute=1)
    _, second = make_key("b", rate_limit_per_minute=1)
    assert (
        call(api_client, {"api_key": first, "model": "test-model", "prompt": "p"}).status_code
        == 200
    )
    assert (
        call(api_client, {"api_key": second, "model": "test-model", "prompt": "p"}).status_code
        == 200
    )


def test_an_unknown_model_at_the_runtime_is_400(api_client, api_key, runtime):
    body = assert_error(
        call(api_client, {"api_key": api_key, "model": "nope", "prompt": "p"}), 400, "unknown_model"
    )
    assert body["details"]["model"] == "nope"


def test_an_unknown_model_at_an_openai_runtime_is_400(api_client, api_key, runtime, settings):
    settings.MODEL_RUNTIME_API = "openai"
    assert_error(
        call(api_client, {"api_key": api_key, "model": "nope", "prompt": "p"}), 400, "unknown_model"
    )


def test_a_runtime_error_is_502_with_its_message(api_client, api_key, runtime):
    runtime.script = lambda prompt, body: Reply(status=500, error="out of memory")
    body = assert_error(
        call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "p"}),
        502,
        "runtime_error",
    )
    assert body["details"]["runtime_message"] == "out of memory"
    assert UsageRecord.objects.get().error == "runtime_error"


def test_a_busy_runtime_is_503(api_client, api_key, runtime):
    runtime.script = lambda prompt, body: Reply(status=503, error="busy")
    assert_error(
        call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "p"}),
        503,
        "runtime_busy",
    )


def test_a_runtime_that_hangs_is_504(api_client, api_key, runtime, settings):
    settings.RUNTIME_READ_TIMEOUT = 0.3
    runtime.script = lambda prompt, body: Reply(text="late", delay=5)
    assert_error(
        call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "p"}),
        504,
        "runtime_timeout",
    )


def test_a_runtime_that_is_down_is_502(api_client, api_key, runtime, settings, unused_port):
    settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{unused_port}"
    assert_error(
        call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "p"}),
        502,
        "runtime_unavailable",
    )


def test_a_runtime_without_the_endpoint_is_502(api_client, api_key, runtime, settings):
    settings.MODEL_RUNTIME_URL = runtime.url + "/not-a-runtime"
    body = assert_error(
        call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "p"}),
        502,
        "runtime_error",
    )
    assert body["details"]["runtime_status"] == 404


def test_the_elapsed_time_is_in_seconds(api_client, api_key, runtime):
    runtime.script = lambda prompt, body: Reply(text="slow", delay=0.3)
    elapsed = call(api_client, {"api_key": api_key, "model": "test-model", "prompt": "p"}).json()[
        "elapsed"
    ]
    assert 0.3 <= elapsed < 2


def test_it_updates_last_used_at_most_once_a_minute(api_client, runtime, make_key):
    key, plain = make_key()
    body = {"api_key": plain, "model": "test-model", "prompt": "p"}
    call(api_client, body)
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    call(api_client, body)
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first
