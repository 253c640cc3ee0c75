"""Request ids (X-Request-ID) and the context of log lines (core.requestid, core.logs)."""

import json
import logging

import pytest

from agents.models import Job
from core import requestid
from core.logs import ContextFilter, JsonFormatter, logging_config
from tests.test_jobs_api import BODY, START, post_json

pytestmark = pytest.mark.django_db


def _is_new_id(value: str) -> bool:
    return len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def test_every_answer_carries_a_new_request_id_when_the_client_sent_none(client, runtime):
    first = client.get("/healthz")
    second = client.get("/healthz")
    assert _is_new_id(first["X-Request-ID"]) and _is_new_id(second["X-Request-ID"])
    assert first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.parametrize(
    ("path", "status"), [("/healthz", 200), ("/nowhere", 404), ("/agent/job/start", 405)]
)
def test_a_sane_client_request_id_comes_back_on_answers_and_errors(client, runtime, path, status):
    response = client.get(path, HTTP_X_REQUEST_ID="order-42/retry:1")
    assert response.status_code == status
    assert response["X-Request-ID"] == "order-42/retry:1"


@pytest.mark.parametrize("offered", ["x" * 129, "with space", "tab\there", "é-accent", ""])
def test_an_insane_client_request_id_is_replaced_by_a_new_one(client, offered):
    response = client.get("/healthz", HTTP_X_REQUEST_ID=offered)
    assert _is_new_id(response["X-Request-ID"])


def test_the_stateless_endpoint_answers_with_the_request_id_on_the_asgi_path(
    asgi_client, runtime, api_key
):
    ok = asgi_client.post(
        "/api.php",
        {"api_key": api_key, "model": "test-model", "prompt": "hi"},
        content_type="application/json",
        headers={"X-Request-ID": "call-1"},
    )
    refused = asgi_client.post("/api.php", {"api_key": "nope"}, content_type="application/json")
    assert ok.status_code == 200 and ok["X-Request-ID"] == "call-1"
    assert refused.status_code == 401 and _is_new_id(refused["X-Request-ID"])
    [call] = runtime.generate_requests()
    assert call.headers.get("X-Request-ID") == "call-1"


def test_the_request_id_is_stored_on_the_job_and_sent_to_the_runtime_by_its_run(
    agent_client, runtime, sync_queue, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(agent_client, START, BODY, HTTP_X_REQUEST_ID="ticket-7")
    assert response["X-Request-ID"] == "ticket-7"
    job = Job.objects.get(pk=response.json()["data"]["job_id"])
    assert job.request_id == "ticket-7"
    assert job.status == "finished"
    calls = runtime.generate_requests()
    assert calls and all(call.headers.get("X-Request-ID") == "ticket-7" for call in calls)


def _record(message: str) -> logging.LogRecord:
    record = logging.LogRecord("agents.runner", logging.WARNING, __file__, 1, message, (), None)
    ContextFilter().filter(record)
    return record


def test_a_json_line_holds_the_time_level_logger_message_and_the_ids_of_its_context():
    with requestid.bound(request="req-1", job="job_1"):
        line = JsonFormatter().format(_record("Job lease lost"))
    entry = json.loads(line)
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "agents.runner"
    assert entry["message"] == "Job lease lost"
    assert entry["request_id"] == "req-1" and entry["job_id"] == "job_1"
    assert entry["timestamp"].endswith("+00:00")


def test_a_text_line_names_the_ids_of_its_context_and_nothing_when_there_is_none():
    text = logging.Formatter(
        logging_config(json_format=False, level="INFO")["formatters"]["main"]["format"]
    )
    with requestid.bound(request="req-1", job="job_1"):
        assert "[request_id=req-1 job_id=job_1] hello" in text.format(_record("hello"))
    with requestid.bound(request=""):  # whatever an earlier test's request left
        assert text.format(_record("hello")).endswith("agents.runner hello")
