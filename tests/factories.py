"""Factories of the agents' models for tests."""

import contextlib
import importlib
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agents.models import ACTIVE, TERMINAL, AgentProfile, Job, JobKind, JobStatus
from gateway.models import ApiKey


def default_profile() -> AgentProfile:
    """The profile named ``default``, made by its data migration again if a transactional
    test's flush removed it."""
    profile = AgentProfile.objects.filter(name="default").first()
    if profile is None:
        migration = importlib.import_module("agents.migrations.0003_default_profile_and_reaper")
        migration.create_default_profile(apps, None)
        update = importlib.import_module("agents.migrations.0004_prompt_style")
        update.update_default_profile(apps, None)
        # Its example conversation and its task prompt, as the later migrations set them.
        example = importlib.import_module("agents.migrations.0005_default_prompt_example")
        example.set_prompt(example.OLD_SYSTEM_PROMPT, example.DEFAULT_SYSTEM_PROMPT)(apps, None)
        task = importlib.import_module("agents.migrations.0007_profile_task_prompt")
        task.set_task_prompt(apps, None)
        chat = importlib.import_module("agents.migrations.0014_default_profile_for_chat_models")
        chat.to_chat(apps, None)
        profile = AgentProfile.objects.get(name="default")
    return profile


def tools_listed_profile() -> AgentProfile:
    """The default profile in the ``chat`` prompt style: its prompts list its tools, so the
    model's tool calls run (a transcript lists none, and runs none the model writes)."""
    profile = default_profile()
    profile.prompt_style = "chat"
    profile.save(update_fields=["prompt_style"])
    return profile


def make_job(api_key: ApiKey, *, status: str = JobStatus.QUEUED, **fields: Any) -> Job:
    """A task job of the key's owner in ``status``, with what the constraints ask of it."""
    now = timezone.now()
    values: dict[str, Any] = {
        "owner_id": api_key.owner_id,
        "api_key": api_key,
        "kind": JobKind.TASK,
        "source": "tests",
        "scope_type": "ticket",
        "scope_id": "T-1",
        "task": "Say hello.",
        "profile": default_profile(),
        "status": status,
    }
    if status in ACTIVE:
        values.update(
            lease_owner="another-worker",
            lease_expires_at=now + timedelta(minutes=1),
            started_at=now,
            attempts=1,
        )
    if status in TERMINAL:
        values["finished_at"] = now
    values.update(fields)
    return Job.objects.create(**values)


def wait_for(condition: Callable[[], Any], *, timeout: float = 30.0, what: str = "") -> Any:
    """Polls ``condition`` until it is truthy and returns its value; fails after ``timeout``.

    Deadlines are generous on purpose: the machine may be slow, and a passing test never
    waits for them.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.05)


def job_progress(job_ids: list[str]) -> list[tuple[Any, ...]]:
    """What moves while jobs are worked on: their status, runs, steps and heartbeats."""
    rows = Job.objects.filter(pk__in=job_ids).order_by("pk")
    return [
        (job.pk, job.status, job.attempts, job.heartbeat_at, job.lease_owner, job.steps.count())
        for job in rows
    ]


def recovery_seconds() -> float:
    """How long a job may sit still and yet be on its way: its lease runs out, the reaper
    comes by, and a worker claims it again (twice over, for a busy machine)."""
    return 2 * (settings.JOB_LEASE_SECONDS + settings.JOB_REAP_SECONDS)


def wait_while_moving(
    condition: Callable[[], Any],
    *,
    progress: Callable[[], Any],
    still_for: float,
    what: str = "",
) -> Any:
    """Polls ``condition`` until it is truthy and returns its value. It fails only once
    ``progress()`` (a snapshot of what the condition waits on) has not changed for
    ``still_for`` seconds: a busy machine makes the work slower, not stuck, so the wait
    scales with the work instead of a guess of wall-clock time."""
    last, since = progress(), time.monotonic()
    while True:
        value = condition()
        if value:
            return value
        now = progress()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > still_for:
            raise AssertionError(
                f"Nothing moved for {still_for:.0f} s while waiting for {what or condition}: {last}"
            )
        time.sleep(0.05)


class InThread:
    """Runs ``func(*args)`` in a thread with its own database connection, closed at the end."""

    def __init__(self, func: Callable[..., Any], *args: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(func, args), daemon=True)
        self._thread.start()

    def _run(self, func: Callable[..., Any], args: tuple) -> None:
        try:
            self.result = func(*args)
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def join(self, timeout: float = 60.0) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the thread did not end"
        if self.error is not None:
            raise self.error
        return self.result


@contextlib.contextmanager
def key_in_flight(owner_id: int, key: str) -> Iterator[None]:
    """An Idempotency-Key held by a request still in its transaction (another connection,
    which inserted the key's row and has not committed); rolled back at the end."""
    from agents.models import IdempotencyKey

    inserted, done = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            now = timezone.now()
            IdempotencyKey.objects.create(
                owner_id=owner_id,
                key=key,
                fingerprint="",
                method="POST",
                path="/",
                created_at=now,
                expires_at=now,
            )
            inserted.set()
            done.wait(30)
            transaction.set_rollback(True)

    holder = InThread(hold)
    try:
        assert inserted.wait(10), "the key was not inserted"
        yield
    finally:
        done.set()
        holder.join()
