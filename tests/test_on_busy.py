"""POST /agent/chat's on_busy: what a chat does when its conversation has one queued or running."""

import pytest

from agents import runner, services
from agents.models import Job, JobStatus
from conversations.models import Conversation, Message
from tests.envelope import assert_error

pytestmark = pytest.mark.django_db

SCOPE = {"source": "web", "scope_type": "ticket", "scope_id": 7}


def chat(client, prompt: str, **fields):
    return client.post("/agent/chat", {**SCOPE, "prompt": prompt, **fields}, format="json")


def queued_chat(client, prompt: str = "First?") -> str:
    """A chat that waits: no worker runs here, its wake-up goes to the queue."""
    response = chat(client, prompt)
    assert response.status_code == 200, response.content
    return response.json()["data"]["job_id"]


def test_enqueue_is_the_default_and_waits_in_arrival_order(agent_client):
    first = queued_chat(agent_client)
    second = chat(agent_client, "Second?", on_busy="enqueue").json()["data"]["job_id"]
    assert Job.objects.get(pk=first).status == JobStatus.QUEUED
    assert Job.objects.get(pk=second).status == JobStatus.QUEUED
    assert Message.objects.count() == 2


def test_reject_refuses_a_busy_conversation_and_stores_nothing(agent_client):
    first = queued_chat(agent_client)
    body = assert_error(chat(agent_client, "Second?", on_busy="reject"), 409, "conversation_busy")
    assert body["details"]["job_id"] == first
    assert body["details"]["conversation_id"] == Conversation.objects.get().pk
    assert list(Message.objects.values_list("content", flat=True)) == ["First?"]
    assert Job.objects.count() == 1


def test_reject_starts_a_chat_on_an_idle_conversation(agent_client):
    assert chat(agent_client, "Alone?", on_busy="reject").status_code == 200
    job = Job.objects.get()
    # The chat is over: the conversation is idle again.
    Job.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED, finished_at=job.created_at)
    assert chat(agent_client, "Again?", on_busy="reject").status_code == 200


def test_an_unknown_on_busy_is_a_validation_error(agent_client):
    body = assert_error(chat(agent_client, "Hi", on_busy="wait"), 400, "validation_error")
    assert "on_busy" in body["details"]["fields"]


def test_interrupt_cancels_a_queued_chat_and_keeps_its_message(agent_client, staff_client):
    first = queued_chat(agent_client)
    second = chat(agent_client, "Instead?", on_busy="interrupt").json()["data"]["job_id"]
    assert Job.objects.get(pk=first).status == JobStatus.CANCELLED
    assert Job.objects.get(pk=second).status == JobStatus.QUEUED
    assert list(Message.objects.order_by("seq").values_list("content", flat=True)) == [
        "First?",
        "Instead?",
    ]
    conversation = Conversation.objects.get()
    page = staff_client.get(f"/admin/conversations/conversation/{conversation.pk}/change/")
    assert page.status_code == 200
    assert page.content.count(b"unanswered: its chat was cancelled") == 1


def test_interrupt_stops_a_running_chat_then_runs(
    agent_client, runtime, sync_queue, django_capture_on_commit_callbacks
):
    runtime.script = lambda prompt, body: "Answered."
    first = queued_chat(agent_client)
    claimed = runner.claim(first)
    assert claimed is not None
    job, token = claimed
    with django_capture_on_commit_callbacks(execute=True):
        second = chat(agent_client, "Now this.", on_busy="interrupt").json()["data"]["job_id"]
    assert Job.objects.get(pk=first).status == JobStatus.CANCELLING
    assert Job.objects.get(pk=second).status == JobStatus.QUEUED  # waits for the first to stop
    # The first's worker sees the cancel at its next check and ends it; the next chat runs.
    with django_capture_on_commit_callbacks(execute=True):
        services.job_mark_cancelled(job, token=token)
        services.job_after_run(job)
    assert Job.objects.get(pk=first).status == JobStatus.CANCELLED
    assert Job.objects.get(pk=second).status == JobStatus.FINISHED
    contents = list(Message.objects.order_by("seq").values_list("role", "content"))
    assert contents == [("user", "First?"), ("user", "Now this."), ("assistant", "Answered.")]
