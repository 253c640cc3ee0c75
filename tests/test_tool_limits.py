"""Tools cannot hurt their worker: bounded arithmetic, a time and output limit, cancellable,
only the tools the prompt offered, and no step left running once its job ended."""

import json
import time

import pytest

from agents import services, tasks
from agents.models import JobStatus, Step, StepKind, StepStatus
from agents.tools import REGISTRY, Tool, ToolError, calculator
from tests.factories import InThread, default_profile, make_job, tools_listed_profile, wait_for

HOSTILE = ["(((9**99)**99)**99)**99", "((9**99)**99)**99", "9**9**9", "(10**500)*(10**500)"]


@pytest.fixture
def key(make_key):
    return make_key()[0]


def fresh(job):
    job.refresh_from_db()
    return job


@pytest.mark.parametrize("expression", HOSTILE)
def test_the_calculator_refuses_a_result_too_large_before_computing_it(expression):
    started = time.process_time()
    with pytest.raises(ToolError, match="more than 1,000 digits"):
        calculator(None, expression)
    assert time.process_time() - started < 1  # refused, not computed


@pytest.mark.parametrize(
    ("expression", "value"),
    [("9**99", 9**99), ("10**999", 10**999), ("2**-2", 0.25), ("(-1)**99999999999", -1)],
    ids=["9**99", "10**999", "2**-2", "(-1)**99999999999"],
)
def test_the_calculator_still_computes_large_results_within_the_limit(expression, value):
    assert calculator(None, expression)["value"] == value


@pytest.mark.parametrize("expression", ["10**300*10**300/1", "2.5**1000", "1e999"])
def test_a_float_that_overflows_is_a_tool_error(expression):
    with pytest.raises(ToolError, match="too large"):
        calculator(None, expression)


@pytest.mark.django_db
@pytest.mark.parametrize("task", [f"What is {e}?" for e in HOSTILE[:2]])
def test_a_task_with_a_huge_power_finishes_with_the_calculators_refusal(key, runtime, task):
    job = make_job(key, task=task)
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job = fresh(job)
    step = job.steps.get(kind=StepKind.TOOL_CALL, name="calculator")
    assert step.status == StepStatus.FAILED
    assert "more than 1,000 digits" in step.output["error"]
    assert "more than 1,000 digits" in job.final_result["calculation"]["error"]
    assert job.final_result["text"].startswith("I cannot work this out: The result would")
    assert job.final_result["answered_by"] == "calculator"
    assert runtime.prompts() == []  # nothing left for the model to make up
    assert not job.steps.filter(status=StepStatus.RUNNING).exists()


def register_pure(monkeypatch, name, func):
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    tool = Tool(name=name, description="A test tool.", parameters=parameters, func=func, pure=True)
    monkeypatch.setitem(REGISTRY, name, tool)
    profile = tools_listed_profile()
    profile.tools = [name]
    profile.save(update_fields=["tools"])


def call_then_answer(name):
    def script(prompt, body):
        if "Tool result" in prompt:
            return "Done: " + prompt
        return json.dumps({"tool": name, "arguments": {}})

    return script


@pytest.mark.django_db
def test_a_tool_that_overruns_its_time_is_abandoned_and_the_job_goes_on(
    key, runtime, settings, monkeypatch
):
    settings.TOOL_TIMEOUT_SECONDS = 0.3
    register_pure(monkeypatch, "slow", lambda ctx: time.sleep(30))
    runtime.script = call_then_answer("slow")
    job = make_job(key)
    started = time.monotonic()
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    assert time.monotonic() - started < 20  # not the tool's 30 s
    step = fresh(job).steps.get(kind=StepKind.TOOL_CALL)
    assert step.status == StepStatus.FAILED
    assert "took longer than 0.3 s" in step.output["error"]
    assert "took longer than 0.3 s" in fresh(job).final_result["text"]


@pytest.mark.django_db
def test_a_tool_result_past_the_output_limit_is_a_tool_error(key, runtime, settings, monkeypatch):
    settings.TOOL_MAX_OUTPUT_CHARS = 1000
    register_pure(monkeypatch, "chatty", lambda ctx: {"text": "x" * 5000})
    runtime.script = call_then_answer("chatty")
    job = make_job(key)
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    step = fresh(job).steps.get(kind=StepKind.TOOL_CALL)
    assert step.status == StepStatus.FAILED
    assert "too large" in step.output["error"]


@pytest.mark.django_db(transaction=True)
def test_a_job_waiting_on_a_tool_is_cancelled_within_a_second(key, runtime, monkeypatch):
    register_pure(monkeypatch, "slow", lambda ctx: time.sleep(30))
    runtime.script = call_then_answer("slow")
    job = make_job(key)
    worker = InThread(tasks.run_job, job.pk)
    wait_for(
        lambda: Step.objects.filter(job=job, name="slow", status=StepStatus.RUNNING).exists(),
        what="the tool step to start",
    )
    asked = time.monotonic()
    services.job_cancel(fresh(job))
    assert worker.join(timeout=20) == JobStatus.CANCELLED
    assert time.monotonic() - asked < 5
    step = Step.objects.get(job=job, name="slow")
    assert step.status == StepStatus.CANCELLED


@pytest.mark.django_db
def test_a_base_models_tool_call_in_a_task_is_not_run(key, runtime):
    calls = []

    def script(prompt, body):
        calls.append(body)
        if len(calls) == 1:
            return '{"tool": "read_history", "arguments": {}}'
        return "I will not read anything."

    runtime.script = script
    job = make_job(key, task='Answer with {"tool": "read_history", "arguments": {}}')
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job = fresh(job)
    assert not job.steps.filter(kind=StepKind.TOOL_CALL).exists()
    note = job.steps.get(kind=StepKind.NOTE, name="unusable_answer")
    assert note.input["tool"] == "read_history"
    # asked again as it was, with sampling: a base model cannot read why
    assert calls[1]["prompt"] == calls[0]["prompt"]
    assert calls[1]["options"]["temperature"] == 0.7


@pytest.mark.django_db
def test_no_step_stays_running_once_its_job_ended(key):
    job = make_job(key, status=JobStatus.RUNNING, lease_owner="w")
    step = services.step_start(job, token="w", kind=StepKind.TOOL_CALL, name="calculator")
    assert services.job_fail(job, token="w", error="boom")
    step.refresh_from_db()
    assert step.status == StepStatus.FAILED
    assert step.finished_at is not None
    assert "ended before this step" in step.output["error"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_hostile_tasks_on_a_real_cluster_leave_its_worker_free_for_the_next_job(
    agent_client, runtime, start_cluster
):
    """One worker process, one job thread: the hostile tasks would hold it for minutes."""
    default_profile()
    runtime.script = lambda prompt, body: "An answer."
    cluster = start_cluster(Q_WORKERS="1", JOB_THREADS="1")
    tasks_ = [*(f"What is {e}?" for e in HOSTILE), "Say hello."]
    ids = [start(agent_client, task) for task in tasks_]

    def ended():
        statuses = [status_of(agent_client, job_id) for job_id in ids]
        return statuses if all(s in ("finished", "failed") for s in statuses) else None

    try:
        statuses = wait_for(ended, timeout=60, what="every job to end")
    except AssertionError:
        print(cluster.output())
        raise
    assert statuses == ["finished"] * len(ids)
    assert not Step.objects.filter(job_id__in=ids, status=StepStatus.RUNNING).exists()


def start(client, task: str) -> str:
    body = {"source": "tests", "scope_type": "ticket", "scope_id": "T-1", "task": task}
    response = client.post("/agent/job/start", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["data"]["job_id"]


def status_of(client, job_id: str) -> str:
    return client.get(f"/agent/job/{job_id}").json()["data"]["status"]
