"""Fair queues on a real ``manage.py qcluster``: one owner's backlog does not hold another
owner's chat for more than one job's time, with the database broker and with Redis.

The loopback runtime answers each model call after a pause, so that first in, first out
would keep the chat waiting behind the whole backlog (about ten seconds here).
"""

import os

import pytest

from agents.models import Job, JobStatus
from tests.factories import default_profile, wait_for
from tests.runtime_server import Reply
from tests.test_jobs_api import BODY, START, post_json

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
BACKLOG = 24
PAUSE = 0.4  # seconds of each model call


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


@pytest.fixture(params=["database", "redis"])
def broker_env(request) -> dict[str, str]:
    if request.param == "database":
        return {}
    return request.getfixturevalue("use_redis_broker")(REDIS_URL)


def test_a_new_owners_chat_starts_within_one_job_of_another_owners_backlog(
    agent_client, api_client, make_key, runtime, start_cluster, broker_env
):
    runtime.script = lambda prompt, body: Reply("Done.", delay=PAUSE)
    cluster = start_cluster(Q_WORKERS="1", JOB_THREADS="1", **broker_env)
    backlog = []
    for _ in range(BACKLOG):
        response = post_json(agent_client, START, BODY)
        assert response.status_code == 200, response.content
        backlog.append(response.json()["data"]["job_id"])
    wait_for(
        lambda: Job.objects.filter(pk__in=backlog, status=JobStatus.RUNNING).exists(),
        timeout=45,
        what="the backlog to be running",
    )

    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_key('bob')[1]}")
    body = {"source": "web", "scope_type": "ticket", "scope_id": 7, "prompt": "Hello?"}
    response = api_client.post("/agent/chat", body, format="json")
    assert response.status_code == 200, response.content
    chat_id = response.json()["data"]["job_id"]
    try:
        wait_for(
            lambda: Job.objects.filter(pk=chat_id, status=JobStatus.FINISHED).exists(),
            timeout=45,
            what="the new owner's chat to finish",
        )
    except AssertionError:
        print(cluster.output())
        raise

    chat = Job.objects.get(pk=chat_id)
    # At most the backlog's job whose claim was under way as the chat arrived went first.
    jumped = Job.objects.filter(
        pk__in=backlog, started_at__gt=chat.created_at, started_at__lt=chat.started_at
    ).count()
    assert jumped <= 1, cluster.output()
    waiting = Job.objects.filter(pk__in=backlog, status=JobStatus.QUEUED).count()
    assert waiting >= BACKLOG // 2, "the backlog ran out first: the test shows nothing"
    wait_for(
        lambda: Job.objects.filter(pk__in=backlog, status=JobStatus.FINISHED).count() == BACKLOG,
        timeout=60,
        what="the whole backlog to finish",
    )
