"""While nothing happens, a job's and a conversation's event streams send a ``: keep-alive``
comment every ``EVENTS_KEEPALIVE_SECONDS``, so that proxies keep the connection: read raw
from the production server (gunicorn, uvicorn), a job left queued with no worker."""

import time

import httpx
import pytest

from tests.factories import default_profile
from tests.live import request

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def comments_and_events(url: str, key: str, path: str, seconds: float) -> list[str]:
    """The lines of the stream at ``path`` that start a comment or an event, for ``seconds``."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client(timeout=10) as client,
        client.stream("GET", f"{url}{path}", headers=headers) as answer,
    ):
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith((":", "event:")):
                seen.append(line)
            if time.monotonic() > deadline:
                return seen
    return seen


def test_an_idle_stream_sends_a_keep_alive_comment_at_each_interval(start_web, api_key):
    default_profile()
    web = start_web(EVENTS_KEEPALIVE_SECONDS="0.3")
    body = {"source": "t", "scope_type": "t", "scope_id": "k", "prompt": "Hello?"}
    status, answer = request(web.url, "POST", "/agent/chat", body, key=api_key)
    assert status == 200, answer
    job_id, conversation_id = answer["data"]["job_id"], answer["data"]["conversation_id"]

    # No worker runs: after its first event (queued), the job's stream only keeps alive.
    lines = comments_and_events(web.url, api_key, f"/agent/job/{job_id}/events", 2.0)
    assert lines[0] == "event: status"
    assert lines[1:] and set(lines[1:]) == {": keep-alive"}
    assert len(lines[1:]) >= 3  # one each 0.3 s for 2 s, on a busy machine too

    path = f"/agent/conversation/{conversation_id}/events"
    lines = comments_and_events(web.url, api_key, path, 2.0)
    assert len(lines) >= 3 and set(lines) == {": keep-alive"}
