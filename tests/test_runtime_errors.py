"""Runtime error answers mapped by what they mean: a prompt over the context is 400
context_length_exceeded with the numbers, another refusal 400 runtime_rejected, a 5xx stays
502; messages reach the client on one line, without paths or tracebacks."""

import json

import pytest

from gateway.models import UsageRecord
from gateway.runtime_errors import context_overflow, error_message
from tests.envelope import assert_error
from tests.runtime_server import Reply

PATHY = (
    "1 validation error for CreateCompletionRequest\ntemperature\n  Input should be a valid "
    'number\nTraceback (most recent call last):\n  File "/opt/venv/lib/python3.11/site-packages'
    '/llama_cpp/server/app.py", line 264, in create_completion\nValueError: bad'
)


def call(client, api_key, prompt="hi", **extra):
    body = {"api_key": api_key, "model": "test-model", "prompt": prompt, **extra}
    return client.post("/api.php", data=json.dumps(body), content_type="application/json")


def test_a_message_loses_its_traceback_paths_and_line_breaks():
    message = error_message(json.dumps({"error": {"message": PATHY}}))
    assert "\n" not in message
    assert "Traceback" not in message and "site-packages" not in message
    assert "/opt/" not in message and "app.py" not in message
    assert message.startswith("1 validation error for CreateCompletionRequest temperature")


def test_a_fastapi_validation_answer_reads_as_field_and_message():
    body = {"detail": [{"loc": ["body", "temperature"], "msg": "Input should be a number"}]}
    assert error_message(json.dumps(body)) == "temperature: Input should be a number"


def test_a_long_message_is_cut():
    assert len(error_message("x" * 5000)) <= 300


@pytest.mark.parametrize(
    ("body", "numbers"),
    [
        (
            {
                "error": {
                    "message": "This model's maximum context length is 2048 tokens, however you "
                    "requested 150006 tokens (150000 in your prompt; 6 for the completion).",
                    "code": "context_length_exceeded",
                }
            },
            {"context_length": 2048, "requested_tokens": 150006, "prompt_tokens": 150000},
        ),
        (
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens (4000 in the messages, 1000 in the completion).",
            },
            {"context_length": 4096, "requested_tokens": 5000, "prompt_tokens": 4000},
        ),
        (
            {
                "error": {
                    "message": "request (4476 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4476,
                    "n_ctx": 4096,
                }
            },
            {"context_length": 4096, "requested_tokens": 4476, "prompt_tokens": 4476},
        ),
        (
            {"error": "Requested tokens (3000) exceed context window of 2048"},
            {"context_length": 2048, "requested_tokens": 3000},
        ),
        ({"error": "the input length exceeds the context length"}, {}),
    ],
)
def test_every_known_wording_of_a_context_overflow_is_recognised(body, numbers):
    assert context_overflow(json.dumps(body)) == numbers


def test_other_errors_are_no_context_overflow():
    assert context_overflow(json.dumps({"error": "model 'x' not found"})) is None
    assert context_overflow("Internal Server Error") is None


@pytest.mark.django_db
@pytest.mark.parametrize("style", ["llama.cpp", "llama-cpp-python", "vllm"])
def test_a_prompt_over_an_openai_runtimes_context_is_context_length_exceeded(
    api_client, api_key, runtime, settings, style
):
    settings.MODEL_RUNTIME_API = "openai"
    runtime.context_length = 600
    runtime.context_style = style
    body = assert_error(
        call(api_client, api_key, prompt="word " * 200, options={"num_predict": 500}),
        400,
        "context_length_exceeded",
    )
    assert body["details"]["context_length"] == 600
    assert body["details"]["requested_tokens"] == 700
    assert body["details"]["runtime_status"] == 400
    [usage] = UsageRecord.objects.all()
    assert (usage.status, usage.error) == (400, "context_length_exceeded")


@pytest.mark.django_db
def test_a_prompt_over_ollamas_context_is_context_length_exceeded(api_client, api_key, runtime):
    runtime.context_length = 10
    response = call(api_client, api_key, prompt="word " * 20)
    body = assert_error(response, 400, "context_length_exceeded")
    assert body["details"]["runtime_message"] == "the input length exceeds the context length"


@pytest.mark.django_db
def test_a_prompt_that_fits_is_answered(api_client, api_key, runtime):
    runtime.context_length = 100
    assert call(api_client, api_key, prompt="word " * 20).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("status", [400, 422])
def test_a_runtime_refusing_the_request_is_runtime_rejected_on_one_clean_line(
    api_client, api_key, runtime, status
):
    runtime.script = lambda prompt, body: Reply(status=status, error=PATHY)
    body = assert_error(call(api_client, api_key), 400, "runtime_rejected")
    message = body["details"]["runtime_message"]
    assert "\n" not in message and "site-packages" not in message and "Traceback" not in message
    assert body["details"]["runtime_status"] == status


@pytest.mark.django_db
@pytest.mark.parametrize("status", [500, 401])
def test_a_runtime_failing_on_its_side_stays_runtime_error(api_client, api_key, runtime, status):
    runtime.script = lambda prompt, body: Reply(status=status, error=PATHY)
    body = assert_error(call(api_client, api_key), 502, "runtime_error")
    assert "site-packages" not in body["details"]["runtime_message"]
