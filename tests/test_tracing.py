"""OpenTelemetry traces (core.tracing), read with the SDK's in-memory exporter."""

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents.models import Job
from core import tracing
from tests.runtime_server import Reply
from tests.test_jobs_api import BODY, START, post_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    assert tracing.configure(exporter=exporter)
    yield exporter
    tracing.disable()


def test_traces_are_off_by_default_and_then_make_nothing(client, runtime, settings):
    assert settings.OTEL_EXPORTER_OTLP_ENDPOINT == ""
    assert not tracing.enabled() and not tracing.configure()
    with tracing.span("anything") as span:
        assert span is None
    assert tracing.traceparent() == ""
    assert client.get("/healthz", HTTP_TRACEPARENT="00-" + "a" * 32 + "-" + "b" * 16 + "-01")


def test_a_job_is_traced_from_the_request_through_the_queue_to_its_runtime_call(
    spans, agent_client, runtime, sync_queue, django_capture_on_commit_callbacks
):
    runtime.script = lambda prompt, body: Reply(text="Hello there.", chunk_delay=0.01)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(agent_client, START, BODY)
    job = Job.objects.get(pk=response.json()["data"]["job_id"])
    finished = spans.get_finished_spans()
    [request] = [s for s in finished if s.name == "POST agent/job/start"]
    [run] = [s for s in finished if s.name == "job.run"]
    calls = [s for s in finished if s.name == "runtime.generate"]
    statements = [s for s in finished if s.name.startswith("db ")]

    assert request.attributes["http.route"] == "agent/job/start"
    assert request.attributes["http.response.status_code"] == 200
    assert job.trace_context.split("-")[1] == format(request.context.trace_id, "032x")
    # Through the queue: the run is a child of the request, in the same trace.
    assert run.parent.span_id == request.context.span_id
    assert run.context.trace_id == request.context.trace_id
    assert run.attributes["job.status"] == "finished"
    assert calls and all(c.context.trace_id == request.context.trace_id for c in calls)
    call = calls[0]
    assert call.attributes["llm.model"] == job.profile.model
    assert call.attributes["llm.completion_tokens"] == 2
    assert call.attributes["llm.streamed"] is True
    assert "llm.time_to_first_token" in call.attributes
    assert any(s.parent and s.parent.span_id == request.context.span_id for s in statements)
    assert any(s.parent and s.parent.span_id == run.context.span_id for s in statements)


def test_an_api_call_on_the_async_path_has_its_request_call_and_statement_spans(
    spans, asgi_client, runtime, api_key
):
    parent = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    response = asgi_client.post(
        "/api.php",
        {"api_key": api_key, "model": "test-model", "prompt": "one two"},
        content_type="application/json",
        headers={"traceparent": parent},
    )
    assert response.status_code == 200
    finished = spans.get_finished_spans()
    [request] = [s for s in finished if s.name == "POST api.php"]
    assert format(request.context.trace_id, "032x") == "1" * 32  # the client's trace
    [call] = [s for s in finished if s.name == "runtime.generate"]
    assert call.parent.span_id == request.context.span_id
    assert call.attributes["llm.prompt_tokens"] == 2
    assert any(
        s.name.startswith("db ") and s.context.trace_id == request.context.trace_id
        for s in finished
    )
