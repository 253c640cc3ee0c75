"""Job event streams from the production server (gunicorn, uvicorn) while real workers
(qcluster) run the jobs, read with a real SSE client (httpx-sse): live tokens, resuming
with Last-Event-ID, cancel, Redis restarting, a SIGKILLed worker, and clients that come
and go. On the suite's database (SQLite's poll, PostgreSQL's NOTIFY) and with Redis."""

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings
from httpx_sse import connect_sse

from agents import eventbus
from agents.models import Job, JobStatus
from config import short_route
from tests.factories import default_profile, wait_for
from tests.live import bus_state, request
from tests.runtime_server import Reply, RuntimeServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLOW_REPLY = Reply(text=" ".join(f"word{i}." for i in range(60)), chunk_delay=0.05)
FAST_RECOVERY = {
    "JOB_LEASE_SECONDS": "2",
    "JOB_HEARTBEAT_SECONDS": "0.5",
    "JOB_REAP_SECONDS": "0.5",
}


@pytest.fixture(autouse=True)
def profile():
    return default_profile()


@pytest.fixture
def own_runtime():
    with RuntimeServer(models=(settings.AGENT_MODEL,)) as server:
        yield server


def stream(
    base_url: str, key: str, job_id: str, *, last_id: int | None = None, timeout: float = 60
) -> Iterator[tuple[int, str, dict]]:
    """The (id, event, data) of the job's stream as they arrive."""
    headers = {"Authorization": f"Bearer {key}"}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    with (
        httpx.Client(timeout=timeout) as client,
        connect_sse(client, "GET", f"{base_url}/agent/job/{job_id}/events", headers=headers) as sse,
    ):
        assert sse.response.status_code == 200
        assert sse.response.headers["content-type"] == "text/event-stream"
        assert sse.response.headers["cache-control"] == "no-cache"
        for event in sse.iter_sse():
            if not event.data:  # httpx-sse passes a comment's (keep-alive's) end on as an event
                continue
            yield int(event.id), event.event, event.json()


def start_chat(url: str, key: str, scope_id: str = "live") -> str:
    body = {"source": "t", "scope_type": "live", "scope_id": scope_id, "prompt": "Talk to me."}
    status, answer = request(url, "POST", "/agent/chat", body, key=key)
    assert status == 200, answer
    return answer["data"]["job_id"]


def assert_whole(events: list[tuple[int, str, dict]], job_id: str) -> None:
    """Ids 1, 2, 3, ... with no gap or repeat, ending with the job's terminal status."""
    assert [e[0] for e in events] == list(range(1, len(events) + 1))
    job = Job.objects.get(pk=job_id)
    assert events[-1][1:] == ("status", events[-1][2])
    assert events[-1][2]["status"] == job.status


def reply_tokens(events: list[tuple[int, str, dict]]) -> str:
    reply = max(d["index"] for _, kind, d in events if kind == "step" and d["name"] == "reply")
    return "".join(d["text"] for _, kind, d in events if kind == "token" and d["step"] == reply)


def watch_live_chat(web, cluster_env, start_cluster, own_runtime, api_key) -> None:
    own_runtime.script = lambda prompt, body: SLOW_REPLY
    start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **cluster_env)
    job_id = start_chat(web.url, api_key)
    events, running_at_first_token = [], None
    for event in stream(web.url, api_key, job_id):
        events.append(event)
        if event[1] == "token" and running_at_first_token is None:
            running_at_first_token = Job.objects.get(pk=job_id).status
    assert running_at_first_token == JobStatus.RUNNING  # tokens arrive while it generates
    assert_whole(events, job_id)
    job = Job.objects.get(pk=job_id)
    assert events[-1][2] == {
        "job_id": job_id,
        "status": "finished",
        "final_result": job.final_result,
    }
    assert reply_tokens(events) == job.final_result["message"]["content"]


def test_a_running_chat_streams_its_tokens_live_and_they_make_the_stored_reply(
    start_web, start_cluster, own_runtime, api_key
):
    web = start_web(MODEL_RUNTIME_URL=own_runtime.url)
    watch_live_chat(web, {}, start_cluster, own_runtime, api_key)


def test_with_redis_the_tokens_stream_live_across_processes(
    start_web, start_cluster, own_runtime, api_key, redis_server, use_redis_broker
):
    env = use_redis_broker(redis_server.url)
    web = start_web(MODEL_RUNTIME_URL=own_runtime.url, **env)
    watch_live_chat(web, env, start_cluster, own_runtime, api_key)


def test_a_stream_resumed_with_last_event_id_goes_on_without_gap_or_repeat(
    start_web, start_cluster, own_runtime, api_key
):
    own_runtime.script = lambda prompt, body: SLOW_REPLY
    web = start_web(MODEL_RUNTIME_URL=own_runtime.url)
    start_cluster(MODEL_RUNTIME_URL=own_runtime.url)
    job_id = start_chat(web.url, api_key)
    first = []
    for event in stream(web.url, api_key, job_id):
        first.append(event)
        if sum(kind == "token" for _, kind, _ in first) == 3:
            break  # the client goes away mid-generation
    rest = list(stream(web.url, api_key, job_id, last_id=first[-1][0]))
    assert rest[0][0] == first[-1][0] + 1
    assert_whole(first + rest, job_id)
    assert list(stream(web.url, api_key, job_id)) == first + rest  # replayed whole


def test_a_cancelled_running_job_ends_its_stream_with_cancelled_and_tokens_stop(
    start_web, start_cluster, own_runtime, api_key
):
    own_runtime.script = lambda prompt, body: Reply(text="word " * 400, chunk_delay=0.05)
    web = start_web(MODEL_RUNTIME_URL=own_runtime.url)
    start_cluster(MODEL_RUNTIME_URL=own_runtime.url)
    job_id = start_chat(web.url, api_key)
    events = []
    for event in stream(web.url, api_key, job_id):
        events.append(event)
        if event[1] == "token" and len([e for e in events if e[1] == "token"]) == 2:
            status, _ = request(web.url, "POST", f"/agent/job/{job_id}/cancel", key=api_key)
            assert status == 200
    assert_whole(events, job_id)
    statuses = [d["status"] for _, kind, d in events if kind == "status"]
    assert statuses[-2:] == ["cancelling", "cancelled"]
    assert len(reply_tokens(events)) < len("word " * 400)


def test_redis_restarting_mid_stream_loses_no_event(
    start_web, start_cluster, own_runtime, api_key, redis_server, use_redis_broker
):
    own_runtime.script = lambda prompt, body: Reply(text="word " * 120, chunk_delay=0.05)
    env = use_redis_broker(redis_server.url)
    web = start_web(MODEL_RUNTIME_URL=own_runtime.url, **env)
    start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **env)
    job_id = start_chat(web.url, api_key)
    events = []
    for event in stream(web.url, api_key, job_id):
        events.append(event)
        if len([e for e in events if e[1] == "token"]) == 3 and redis_server.process.poll() is None:
            redis_server.kill()
            time.sleep(0.5)
            redis_server.start()
    assert_whole(events, job_id)
    assert reply_tokens(events) == Job.objects.get(pk=job_id).final_result["message"]["content"]


def test_a_sigkilled_workers_job_streams_on_after_recovery_with_the_lost_attempt_marked(
    start_web, start_cluster, own_runtime, api_key
):
    own_runtime.script = lambda prompt, body: Reply(text="word " * 200, chunk_delay=0.05)
    web = start_web(MODEL_RUNTIME_URL=own_runtime.url)
    doomed = start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **FAST_RECOVERY)
    job_id = start_chat(web.url, api_key)
    events, rescuer = [], []
    for event in stream(web.url, api_key, job_id):
        events.append(event)
        if event[1] == "token" and not rescuer:
            own_runtime.script = lambda prompt, body: "Still here."
            doomed.kill()
            rescuer.append(start_cluster(MODEL_RUNTIME_URL=own_runtime.url, **FAST_RECOVERY))
    assert_whole(events, job_id)
    statuses = [d["status"] for _, kind, d in events if kind == "status"]
    assert statuses == ["queued", "running", "queued", "running", "finished"]
    lost = [d for _, kind, d in events if kind == "step" and "attempt" in d]
    assert lost and {d["attempt"] for d in lost} == {1}
    assert {d["status"] for d in lost} == {"failed"}


def test_clients_that_connect_and_go_away_leave_no_watch_task_or_thread(
    asgi_server, api_key, runtime
):
    host, port = asgi_server
    started = request(
        f"http://{host}:{port}",
        "POST",
        "/agent/job/start",
        {"source": "t", "scope_type": "t", "scope_id": "1", "task": "Wait for a worker."},
        key=api_key,
    )[1]["data"]["job_id"]  # no worker: it stays queued, its stream open

    def connect_and_leave() -> None:
        first = next(stream(f"http://{host}:{port}", api_key, started))
        assert first[0] == 1

    def threads() -> tuple[int, dict[str, int]]:
        """Threads outside the server's bounded pools, and those in each pool."""
        pools = {"events-db": 0, "short": 0}
        others = 0
        for thread in threading.enumerate():
            pool = next((p for p in pools if thread.name.startswith(p)), None)
            if pool is None:
                others += 1
            else:
                pools[pool] += 1
        return others, pools

    for _ in range(20):
        connect_and_leave()
    idle = wait_for(lambda: (s := bus_state())[:2] == (0, 0) and s, what="the bus to stop")
    others = threads()[0]
    for _ in range(500):
        connect_and_leave()
    # Every stream's watch is gone; a moment later the bus's own tasks stop too.
    wait_for(lambda: bus_state() == idle, what="the streams and the bus to be gone")
    after, pools = threads()
    assert after <= others
    assert pools["events-db"] <= eventbus.DB_THREADS
    assert pools["short"] <= short_route.THREADS
