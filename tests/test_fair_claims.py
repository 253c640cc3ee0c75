"""Fair claiming across owners (``agents.fairness``): what each wake-up of the queue claims.

No worker runs here: the wake-ups wait on the queue, and each test delivers them itself
through the queue's claim (``agents.runner.claim``) in the order the queue would.
"""

import pytest

from agents import runner, services
from agents.models import Job, JobStatus
from tests.factories import default_profile

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


def start(api_key, n: int = 1) -> list[str]:
    return [
        services.task_start(
            api_key=api_key,
            source="tests",
            scope_type="ticket",
            scope_id="T-1",
            task=f"Task {i}.",
            profile_name=None,
        ).pk
        for i in range(n)
    ]


def claimed_by(delivered: str) -> str | None:
    """The id of the job that the wake-up sent for ``delivered`` claims, if any."""
    claimed = runner.claim(delivered)
    return None if claimed is None else claimed[0].pk


def owners(make_key, *names: str):
    return [make_key(name)[0] for name in names]


def test_a_new_owners_job_is_claimed_before_another_owners_backlog(make_key):
    alice, bob = owners(make_key, "alice", "bob")
    backlog = start(alice, 5)
    assert claimed_by(backlog[0]) == backlog[0]
    (bobs,) = start(bob)
    # The next wake-up on the queue is the one sent for Alice's second job.
    assert claimed_by(backlog[1]) == bobs
    assert claimed_by(backlog[2]) == backlog[1]
    assert claimed_by(bobs) == backlog[2]


def test_two_backlogs_alternate(make_key):
    alice, bob = owners(make_key, "alice", "bob")
    alices, bobs = start(alice, 3), start(bob, 3)
    order = [claimed_by(job_id) for job_id in alices + bobs]
    assert order == [alices[0], bobs[0], alices[1], bobs[1], alices[2], bobs[2]]


def test_an_owner_who_keeps_one_job_waiting_does_not_starve_a_backlog(make_key):
    alice, bob = owners(make_key, "alice", "bob")
    alices = start(alice, 3)
    order = []
    for delivered in alices:
        start(bob)  # Bob sends his next job as soon as his last one is taken
        order.append(claimed_by(delivered))
    assert [Job.objects.get(pk=pk).owner.username for pk in order] == ["alice", "bob", "alice"]


def test_newcomers_are_claimed_in_arrival_order(make_key):
    alice, bob, carol = owners(make_key, "alice", "bob", "carol")
    alices = start(alice, 4)
    assert claimed_by(alices[0]) == alices[0]
    (bobs,), (carols,) = start(bob), start(carol)
    assert [claimed_by(pk) for pk in alices[1:]] == [bobs, carols, alices[1]]


def test_a_wakeup_with_nothing_fairer_claims_its_own_job_and_a_duplicate_nothing(make_key):
    (alice,) = owners(make_key, "alice")
    (job_id,) = start(alice)
    assert claimed_by(job_id) == job_id
    assert claimed_by(job_id) is None
    assert Job.objects.get(pk=job_id).status == JobStatus.RUNNING


def chat(client, prompt: str, scope_id: int = 7) -> str:
    body = {"source": "web", "scope_type": "ticket", "scope_id": scope_id, "prompt": prompt}
    response = client.post("/agent/chat", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["data"]["job_id"]


def test_chats_of_one_conversation_still_wait_their_turn(make_key, api_client):
    (_, alice), (_, bob) = make_key("alice"), make_key("bob")
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice}")
    first, second = chat(api_client, "First?"), chat(api_client, "Second?")
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {bob}")
    bobs = chat(api_client, "Mine?")
    assert claimed_by(first) == first
    # Alice's second chat waits for her first: the wake-up sent for it takes Bob's chat.
    assert claimed_by(second) == bobs
    assert claimed_by(bobs) is None
    assert Job.objects.get(pk=second).status == JobStatus.QUEUED


def test_a_wakeup_that_took_another_job_sends_its_own_again(make_key):
    alice, bob = owners(make_key, "alice", "bob")
    backlog = start(alice, 2)
    assert claimed_by(backlog[0]) == backlog[0]
    (bobs,) = start(bob)
    before = Job.objects.get(pk=backlog[1]).enqueued_at
    assert claimed_by(backlog[1]) == bobs
    # Alice's job keeps a wake-up on the way: the one sent for it took Bob's job.
    assert Job.objects.get(pk=backlog[1]).enqueued_at > before
