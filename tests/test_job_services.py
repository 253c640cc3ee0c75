"""Job services and the worker's run of a job: claims, leases, cancel, reaping, the agent loop.

Jobs are run by calling the queue's entry point (``agents.tasks.run_job``) directly: in the
test's thread, or in threads with their own connections where concurrency is the point.
"""

import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import recovery, services, tasks, worker
from agents.context import JobContext
from agents.models import Job, JobStatus, Step, StepKind, StepStatus
from agents.tools import REGISTRY, Tool
from core.errors import status_and_id
from core.exceptions import JobNotCancellable
from gateway import services as gateway
from gateway.models import UsageRecord
from tests.factories import InThread, make_job, tools_listed_profile, wait_for
from tests.runtime_server import Reply

# Threads need committed rows.
TRANSACTIONAL = pytest.mark.django_db(transaction=True)
NO_FINAL_ANSWER = "The model gave no usable final answer within {} model calls."


@pytest.fixture
def key(make_key):
    return make_key()[0]


def expire_lease(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def test_tool(monkeypatch):
    """Registers a tool ``func(ctx)`` named ``name`` and enables it in the default profile."""

    def register(name: str, func) -> None:
        parameters = {"type": "object", "properties": {}, "additionalProperties": False}
        tool = Tool(name=name, description="A test tool.", parameters=parameters, func=func)
        monkeypatch.setitem(REGISTRY, name, tool)
        profile = tools_listed_profile()
        profile.tools = [name]
        profile.save(update_fields=["tools"])

    return register


def call_tool_then_answer(tool: str, answer: str = "All done."):
    """A runtime script: the first answer calls ``tool``, later ones answer ``answer``."""

    def script(prompt: str, body: dict) -> str:
        if "Tool result" in prompt:
            return answer
        return json.dumps({"tool": tool, "arguments": {}})

    return script


# --- Claiming ----------------------------------------------------------------------------


@TRANSACTIONAL
def test_only_one_of_two_concurrent_claims_wins(key):
    for _ in range(10):
        job = make_job(key)
        barrier = threading.Barrier(2)

        def claim(token: str, job_id: str = job.pk, barrier=barrier):
            barrier.wait()
            return services.job_claim(job_id, token=token)

        workers = [InThread(claim, f"worker-{n}") for n in range(2)]
        claimed = [w.join() for w in workers]
        winners = [c for c in claimed if c is not None]
        assert len(winners) == 1
        job = fresh(job)
        assert job.status == JobStatus.RUNNING
        assert job.attempts == 1
        assert job.lease_owner == winners[0].lease_owner


@TRANSACTIONAL
def test_two_concurrent_deliveries_of_one_job_run_it_once(key, runtime):
    runtime.script = lambda prompt, body: Reply(text="Hello.", delay=0.5)
    job = make_job(key)
    barrier = threading.Barrier(2)

    def deliver() -> str:
        barrier.wait()
        return tasks.run_job(job.pk)

    outcomes = sorted(w.join() for w in [InThread(deliver), InThread(deliver)])
    assert outcomes == ["finished", "not claimed"]
    assert len(runtime.generate_requests()) == 1
    job = fresh(job)
    assert job.status == JobStatus.FINISHED
    assert job.attempts == 1
    assert job.steps.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "status",
    [
        JobStatus.RUNNING,
        JobStatus.CANCELLING,
        JobStatus.FINISHED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
    ],
)
def test_a_delivery_of_a_job_that_is_not_queued_does_nothing(key, runtime, status):
    job = make_job(key, status=status)
    before = Job.objects.filter(pk=job.pk).values().get()
    assert services.job_claim(job.pk, token="late") is None
    assert tasks.run_job(job.pk) == "not claimed"
    assert Job.objects.filter(pk=job.pk).values().get() == before
    assert runtime.generate_requests() == []


@pytest.mark.django_db
def test_a_delivery_of_an_unknown_job_does_nothing(runtime):
    assert tasks.run_job("job_01ARZ3NDEKTSV4RRFFQ69G5FAV") == "not claimed"


# --- Leases ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_heartbeat_extends_the_lease(key, settings):
    job = services.job_claim(make_job(key).pk, token="w")
    expire_lease(job)
    assert services.job_heartbeat(job, token="w") == JobStatus.RUNNING
    assert fresh(job).lease_expires_at > timezone.now() + timedelta(
        seconds=settings.JOB_LEASE_SECONDS - 5
    )


@pytest.mark.django_db
def test_a_worker_that_lost_its_lease_changes_nothing(key):
    job = make_job(key)
    old = services.job_claim(job.pk, token="old")
    step = services.step_start(old, token="old", kind=StepKind.MODEL_CALL, name="generate")
    expire_lease(old)
    assert recovery.job_reap()["requeued"] == 1

    def late_writes_change_nothing() -> None:
        before = Job.objects.filter(pk=job.pk).values().get()
        assert not services.job_finish(old, token="old", final_result={"text": "late"})
        assert not services.job_fail(old, token="old", error="late")
        assert not services.job_mark_cancelled(old, token="old")
        for write in (services.job_heartbeat, services.job_status):
            with pytest.raises(services.LeaseLost):
                write(old, token="old")
        with pytest.raises(services.LeaseLost):
            services.step_start(old, token="old", kind=StepKind.NOTE, name="late")
        services.step_finish(step, output={"text": "late"})
        assert Job.objects.filter(pk=job.pk).values().get() == before
        assert Step.objects.get(pk=step.pk).output != {"text": "late"}

    late_writes_change_nothing()  # while it waits in the queue again
    assert fresh(job).status == JobStatus.QUEUED
    new = services.job_claim(job.pk, token="new")
    assert new is not None and new.attempts == 2
    late_writes_change_nothing()  # and while another worker runs it
    assert services.job_finish(new, token="new", final_result={"text": "on time"})
    assert fresh(job).final_result == {"text": "on time"}


@pytest.mark.django_db
def test_the_reaper_closes_the_step_a_dead_worker_left_running(key):
    job = services.job_claim(make_job(key).pk, token="dead")
    step = services.step_start(job, token="dead", kind=StepKind.MODEL_CALL, name="generate")
    expire_lease(job)
    recovery.job_reap()
    step = Step.objects.get(pk=step.pk)
    assert step.status == StepStatus.FAILED
    assert step.finished_at is not None
    assert "stopped responding" in step.output["error"]


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLED])
def test_a_terminal_status_never_changes(key, status):
    job = make_job(key, status=status, lease_owner="")
    before = Job.objects.filter(pk=job.pk).values().get()
    assert services.job_claim(job.pk, token="w") is None
    for token in ("", "w"):
        assert not services.job_finish(job, token=token, final_result={})
        assert not services.job_fail(job, token=token, error="x")
        assert not services.job_mark_cancelled(job, token=token)
    if status == JobStatus.CANCELLED:
        assert services.job_cancel(job) == JobStatus.CANCELLED
    else:
        with pytest.raises(JobNotCancellable):
            services.job_cancel(job)
    recovery.job_reap(now=timezone.now() + timedelta(days=1))
    assert Job.objects.filter(pk=job.pk).values().get() == before


# --- Cancel ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_queued_job_is_cancelled_at_once_and_a_later_delivery_does_nothing(key, runtime):
    job = make_job(key)
    assert services.job_cancel(job) == JobStatus.CANCELLED
    job = fresh(job)
    assert job.status == JobStatus.CANCELLED
    assert job.finished_at is not None and job.cancel_requested_at is not None
    assert tasks.run_job(job.pk) == "not claimed"
    assert runtime.generate_requests() == []
    assert fresh(job).status == JobStatus.CANCELLED


@pytest.mark.django_db
def test_a_running_job_becomes_cancelling_and_its_worker_sees_it(key):
    job = services.job_claim(make_job(key).pk, token="w")
    ctx = JobContext(job, "w")
    assert not ctx.should_stop()
    assert services.job_cancel(fresh(job)) == JobStatus.CANCELLING
    assert fresh(job).cancel_requested_at is not None
    assert ctx.should_stop()
    assert services.job_mark_cancelled(job, token="w")
    assert fresh(job).status == JobStatus.CANCELLED


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.CANCELLING, JobStatus.CANCELLED])
def test_cancelling_again_is_idempotent(key, status):
    job = make_job(key, status=status)
    assert services.job_cancel(job) == status
    assert services.job_cancel(job) == status
    assert fresh(job).status == status


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.FINISHED, JobStatus.FAILED])
def test_a_finished_or_failed_job_is_not_cancellable(key, status):
    job = make_job(key, status=status)
    with pytest.raises(JobNotCancellable) as caught:
        services.job_cancel(job)
    assert status_and_id(caught.value) == (409, "job_not_cancellable")
    assert caught.value.details["status"] == status
    assert fresh(job).status == status


@pytest.mark.django_db
def test_work_that_completed_before_the_cancel_counts_as_finished(key):
    job = services.job_claim(make_job(key).pk, token="w")
    services.job_cancel(fresh(job))
    assert services.job_finish(job, token="w", final_result={"text": "done"})
    assert fresh(job).status == JobStatus.FINISHED


@pytest.mark.django_db
def test_a_cancel_between_steps_stops_the_job_before_its_next_model_call(key, runtime, test_tool):
    test_tool("cancel_my_job", lambda ctx: {"status": services.job_cancel(fresh(ctx.job))})
    runtime.script = call_tool_then_answer("cancel_my_job")
    job = make_job(key)
    assert tasks.run_job(job.pk) == JobStatus.CANCELLED
    job = fresh(job)
    assert job.status == JobStatus.CANCELLED
    assert job.final_result is None
    assert len(runtime.generate_requests()) == 1
    assert [(s.kind, s.status) for s in job.steps.all()] == [
        (StepKind.MODEL_CALL, StepStatus.FINISHED),
        (StepKind.TOOL_CALL, StepStatus.FINISHED),
    ]


@TRANSACTIONAL
def test_a_job_is_cancelled_while_the_model_generates_and_the_stream_is_closed(key, runtime):
    words = 300  # at 0.1 s a chunk the whole answer would take 30 s
    runtime.script = lambda prompt, body: Reply(text="word " * words, chunk_delay=0.1)
    job = make_job(key)
    worker = InThread(tasks.run_job, job.pk)
    wait_for(
        lambda: (
            Step.objects.filter(job=job, kind=StepKind.MODEL_CALL).exists()
            and runtime.generate_requests()
        ),
        what="the model call to start",
    )
    assert services.job_cancel(fresh(job)) == JobStatus.CANCELLING
    assert worker.join() == JobStatus.CANCELLED
    job = fresh(job)
    assert job.status == JobStatus.CANCELLED
    [step] = job.steps.all()
    assert step.status == StepStatus.CANCELLED
    wait_for(lambda: runtime.closed_early == 1, what="the runtime to see the hang-up")
    [usage] = UsageRecord.objects.filter(job_id=job.pk)
    assert (usage.status, usage.error) == (499, "cancelled")
    assert usage.elapsed < words * 0.1  # the stream was cut, not read to its end


@TRANSACTIONAL
def test_a_job_is_cancelled_while_the_runtime_has_not_answered_yet(key, runtime, settings):
    """A runtime sends nothing until its first token (loading the model, reading the
    prompt); a cancel must not wait for it."""
    settings.RUNTIME_READ_TIMEOUT = 60
    runtime.script = lambda prompt, body: Reply(text="Too late.", delay=30)
    job = make_job(key)
    worker = InThread(tasks.run_job, job.pk)
    wait_for(lambda: runtime.generate_requests(), what="the model call to start")
    assert services.job_cancel(fresh(job)) == JobStatus.CANCELLING
    assert worker.join() == JobStatus.CANCELLED
    wait_for(lambda: runtime.closed_early == 1, what="the runtime to see the hang-up")
    [usage] = UsageRecord.objects.filter(job_id=job.pk)
    assert usage.elapsed < 30  # the wait was cut, not sat out


@TRANSACTIONAL
def test_a_slow_first_token_keeps_the_lease_alive(key, runtime, settings):
    settings.JOB_LEASE_SECONDS = 3
    settings.JOB_HEARTBEAT_SECONDS = 0.75
    settings.JOB_CANCEL_POLL_SECONDS = 0.1
    settings.RUNTIME_READ_TIMEOUT = 30
    runtime.script = lambda prompt, body: Reply(text="Worth the wait.", delay=6)
    job = make_job(key)
    worker = InThread(tasks.run_job, job.pk)
    requeued = 0
    while fresh(job).status in (JobStatus.QUEUED, JobStatus.RUNNING) and requeued == 0:
        requeued += recovery.job_reap()["requeued"]  # as a reaper elsewhere would, all along
        time.sleep(0.05)
    assert requeued == 0
    assert worker.join() == JobStatus.FINISHED, fresh(job).error
    assert fresh(job).attempts == 1


# --- The agent loop ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_tool_call_round_trip_reaches_the_final_answer(key, runtime):
    tools_listed_profile()

    def script(prompt: str, body: dict) -> str:
        if "Tool result" in prompt:
            return "6 times 7 is 42."
        return '{"tool": "calculator", "arguments": {"expression": "6*7"}}'

    runtime.script = script
    job = make_job(key, task="Ask the calculator for six times seven and say how it went.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job = fresh(job)
    assert job.final_result["text"] == "6 times 7 is 42."
    assert job.final_result["rounds"] == 2
    first, tool, second = job.steps.all()
    assert (first.kind, tool.kind, second.kind) == ("model_call", "tool_call", "model_call")
    assert [s.index for s in (first, tool, second)] == [0, 1, 2]
    assert tool.name == "calculator"
    assert tool.status == StepStatus.FINISHED
    assert tool.input == {"arguments": {"expression": "6*7"}}
    assert tool.output["result"]["value"] == 42
    assert all(s.elapsed is not None and s.finished_at for s in (first, tool, second))
    assert '"value": 42' in runtime.prompts()[1]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("", "The answer was empty."),
        ("  \n ", "The answer was empty."),
        ('{"tool": "calculator", "arguments": {', "The tool call is not valid JSON."),
        ('{"arguments": {}}', 'A tool call needs a "tool" name.'),
        ('{"tool": "calculator", "arguments": "6*7"}', '"arguments" must be a JSON object.'),
    ],
)
def test_junk_answers_fail_the_job_after_max_steps_without_a_crash_loop(
    key, runtime, answer, problem
):
    runtime.script = lambda prompt, body: answer
    job = make_job(key)
    max_steps = job.profile.max_steps
    assert tasks.run_job(job.pk) == JobStatus.FAILED
    job = fresh(job)
    assert job.status == JobStatus.FAILED
    assert job.error == NO_FINAL_ANSWER.format(max_steps)
    assert job.attempts == 1
    assert len(runtime.generate_requests()) == max_steps
    notes = job.steps.filter(kind=StepKind.NOTE)
    assert notes.count() == max_steps
    assert all(n.input["problem"] == problem for n in notes)
    # A base model's prompt (the default profile) is asked again as it was, with sampling.
    first, *others = runtime.generate_requests()
    assert all(r.body["prompt"] == first.body["prompt"] for r in others)
    assert {r.body["options"]["temperature"] for r in others} == {0.7}
    assert [r.body["options"]["seed"] for r in others] == list(range(2, max_steps + 1))
    # Over is over: neither a second delivery nor the reaper starts it again.
    assert tasks.run_job(job.pk) == "not claimed"
    assert recovery.job_reap(now=timezone.now() + timedelta(days=1))["requeued"] == 0
    assert len(runtime.generate_requests()) == max_steps


@pytest.mark.django_db
def test_an_unknown_tool_is_told_to_the_model_and_bounded_by_max_steps(key, runtime):
    tools_listed_profile()
    runtime.script = lambda prompt, body: '{"tool": "rm_rf", "arguments": {}}'
    job = make_job(key)
    assert tasks.run_job(job.pk) == JobStatus.FAILED
    job = fresh(job)
    assert job.error == NO_FINAL_ANSWER.format(job.profile.max_steps)
    tool_steps = job.steps.filter(kind=StepKind.TOOL_CALL)
    assert tool_steps.count() == job.profile.max_steps
    assert all(s.status == StepStatus.FAILED for s in tool_steps)
    assert "Unknown tool 'rm_rf'" in tool_steps.first().output["error"]
    assert "Unknown tool 'rm_rf'" in runtime.prompts()[-1]


@pytest.mark.django_db
def test_a_tool_that_crashes_fails_the_job_with_the_reason(key, runtime, test_tool):
    def explode(ctx):
        raise RuntimeError("disk on fire")

    test_tool("explode", explode)
    runtime.script = call_tool_then_answer("explode")
    job = make_job(key)
    assert tasks.run_job(job.pk) == JobStatus.FAILED
    job = fresh(job)
    assert job.error == "internal_error: RuntimeError: disk on fire"
    tool_step = job.steps.get(kind=StepKind.TOOL_CALL)
    assert tool_step.status == StepStatus.FAILED
    assert "disk on fire" in tool_step.output["error"]


@pytest.mark.django_db
def test_a_runtime_that_is_down_fails_the_job(key, runtime, settings, unused_port):
    settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{unused_port}"
    job = make_job(key)
    assert tasks.run_job(job.pk) == JobStatus.FAILED
    assert fresh(job).error.startswith("runtime_unavailable: ")


@pytest.mark.django_db
def test_a_revoked_key_fails_the_job_at_its_next_model_call(key, runtime, test_tool):
    test_tool("revoke_my_key", lambda ctx: {"revoked": gateway.api_key_revoke(api_key=key)})
    runtime.script = call_tool_then_answer("revoke_my_key")
    job = make_job(key)
    assert tasks.run_job(job.pk) == JobStatus.FAILED
    job = fresh(job)
    assert job.error.startswith("invalid_api_key: ")
    assert len(runtime.generate_requests()) == 1
    kinds = [(s.kind, s.status) for s in job.steps.all()]
    assert kinds[-1] == (StepKind.MODEL_CALL, StepStatus.FAILED)


@pytest.mark.django_db
def test_the_model_calls_of_a_job_are_accounted_to_its_key(key, runtime):
    runtime.script = lambda prompt, body: "Fine."
    job = make_job(key)
    tasks.run_job(job.pk)
    [usage] = UsageRecord.objects.filter(job_id=job.pk)
    assert usage.api_key_id == key.pk
    assert (usage.origin, usage.status) == (UsageRecord.Origin.AGENT, 200)


# --- Crash recovery ----------------------------------------------------------------------


@pytest.mark.django_db
def test_a_poison_job_fails_after_the_maximum_number_of_attempts(key, settings):
    """Each attempt's worker dies (its lease expires without a heartbeat)."""
    settings.JOB_MAX_ATTEMPTS = 3
    job = make_job(key)
    for attempt in range(1, 4):
        claimed = services.job_claim(job.pk, token=f"doomed-{attempt}")
        assert claimed is not None and claimed.attempts == attempt
        expire_lease(claimed)
        counts = recovery.job_reap()
        assert counts["requeued" if attempt < 3 else "failed"] == 1
    job = fresh(job)
    assert job.status == JobStatus.FAILED
    assert job.attempts == 3
    assert "giving up after 3 attempts" in job.error
    assert job.lease_owner == "" and job.finished_at is not None
    assert services.job_claim(job.pk, token="one-more") is None


@pytest.mark.django_db
def test_a_job_run_again_keeps_its_first_start_and_counts_its_attempts(key):
    job = make_job(key)
    first = services.job_claim(job.pk, token="dead")
    expire_lease(first)
    assert recovery.job_reap()["requeued"] == 1
    second = services.job_claim(job.pk, token="alive")
    assert second.started_at == first.started_at
    assert second.attempts == 2


@pytest.mark.django_db
def test_the_heartbeat_thread_renews_the_lease_of_the_job_its_process_holds(key):
    job = services.job_claim(make_job(key).pk, token="w")
    expire_lease(job)
    with worker.holding(job.pk, "w"):
        worker.beat()
    assert fresh(job).lease_expires_at > timezone.now()
    expire_lease(job)
    worker.beat()  # nothing held any more
    assert fresh(job).lease_expires_at < timezone.now()


@pytest.mark.django_db
def test_one_heartbeat_renews_every_job_its_process_runs_in_one_statement(key):
    first = services.job_claim(make_job(key).pk, token="t1")
    second = services.job_claim(make_job(key).pk, token="t2")
    expire_lease(first)
    expire_lease(second)
    with worker.holding(first.pk, "t1"), worker.holding(second.pk, "t2"):
        assert sorted(worker.held_jobs()) == sorted([first.pk, second.pk])
        with CaptureQueriesContext(connection) as queries:
            worker.beat()
    assert len(queries) == 1
    assert fresh(first).lease_expires_at > timezone.now()
    assert fresh(second).lease_expires_at > timezone.now()
    assert worker.held_jobs() == []


@pytest.mark.django_db
def test_the_heartbeat_leaves_the_lease_of_a_job_held_past_the_timeout_to_expire(key, settings):
    job = services.job_claim(make_job(key).pk, token="stuck")
    expire_lease(job)
    settings.JOB_TIMEOUT = 0  # every job held is past it
    with worker.holding(job.pk, "stuck"):
        worker.beat()
    assert fresh(job).lease_expires_at < timezone.now()
    assert recovery.job_reap()["requeued"] == 1


@pytest.mark.django_db
def test_the_heartbeat_of_a_worker_that_lost_its_job_changes_nothing(key):
    job = services.job_claim(make_job(key).pk, token="stalled")
    expire_lease(job)
    recovery.job_reap()
    with worker.holding(job.pk, "stalled"):
        worker.beat()
    job = fresh(job)
    assert (job.status, job.lease_owner, job.lease_expires_at) == (JobStatus.QUEUED, "", None)


@pytest.mark.django_db
def test_the_reaper_leaves_a_job_with_a_live_lease_alone(key):
    job = services.job_claim(make_job(key).pk, token="alive")
    assert recovery.job_reap() == {"requeued": 0, "failed": 0, "cancelled": 0, "rewoken": 0}
    assert fresh(job).status == JobStatus.RUNNING


@pytest.mark.django_db
def test_the_reaper_ends_a_cancelling_job_whose_worker_died(key):
    job = services.job_claim(make_job(key).pk, token="dead")
    services.job_cancel(fresh(job))
    expire_lease(job)
    assert recovery.job_reap()["cancelled"] == 1
    assert fresh(job).status == JobStatus.CANCELLED


@pytest.mark.django_db
def test_the_reaper_wakes_a_queued_job_whose_message_was_lost(
    key, runtime, sync_queue, settings, django_capture_on_commit_callbacks
):
    runtime.script = lambda prompt, body: "Recovered."
    long_ago = timezone.now() - timedelta(seconds=settings.JOB_REWAKE_SECONDS * 2)
    lost = make_job(key)
    Job.objects.filter(pk=lost.pk).update(created_at=long_ago, enqueued_at=long_ago)
    just_sent = make_job(key, enqueued_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert recovery.job_reap()["rewoken"] == 1
    assert fresh(lost).status == JobStatus.FINISHED
    assert fresh(lost).final_result["text"] == "Recovered."
    assert fresh(just_sent).status == JobStatus.QUEUED


@pytest.mark.django_db
def test_the_reaper_does_not_rewake_a_backlog_that_is_still_in_the_queue(key, settings):
    from django_q.brokers import get_broker

    long_ago = timezone.now() - timedelta(seconds=settings.JOB_REWAKE_SECONDS * 2)
    waiting = make_job(key, enqueued_at=long_ago)
    broker = get_broker()
    broker.enqueue("a wake-up still waiting for a worker")
    assert recovery.job_reap()["rewoken"] == 0
    broker.purge_queue()
    assert recovery.job_reap()["rewoken"] == 1
    assert fresh(waiting).status == JobStatus.QUEUED


@pytest.mark.django_db
def test_a_requeued_job_is_woken_again_and_finishes(
    key, runtime, sync_queue, django_capture_on_commit_callbacks
):
    runtime.script = lambda prompt, body: "Second time lucky."
    job = services.job_claim(make_job(key).pk, token="dead")
    expire_lease(job)
    with django_capture_on_commit_callbacks(execute=True):
        assert recovery.job_reap()["requeued"] == 1
    job = fresh(job)
    assert job.status == JobStatus.FINISHED
    assert job.attempts == 2
