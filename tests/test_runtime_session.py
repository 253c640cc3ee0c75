"""The runtime client's HTTP session: what goes over the wire, against the loopback runtime
(the synchronous entry, whose calls run on the process's runtime loop)."""

import json
import math

import pytest

from core import requestid
from core.exceptions import RuntimeUnavailable
from gateway import routing
from gateway import runtime as runtime_client
from gateway.routing import Endpoint
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db


def _endpoint(runtime, api_key: str = "") -> Endpoint:
    return Endpoint(
        name="default",
        base_url=runtime.url,
        api="ollama",
        limits=routing.default_endpoint().limits,
        api_key=api_key,
    )


def test_a_json_post_carries_the_utf8_json_body_its_type_and_the_key(runtime):
    body = {"model": "test-model", "prompt": "naïve ☕\n", "stream": False, "options": {"seed": 1}}
    runtime_client.post_json(
        _endpoint(runtime, "k"), "/api/generate", body, model="test-model", read_timeout=5
    )
    [sent] = runtime.requests
    assert sent.method == "POST" and sent.body == body
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.headers["Authorization"] == "Bearer k"
    assert int(sent.headers["Content-Length"]) == len(json.dumps(body).encode())


def test_a_body_with_nan_is_refused_before_anything_is_sent(runtime):
    with pytest.raises(ValueError):
        runtime_client.post_json(
            _endpoint(runtime), "/api/generate", {"t": math.nan}, model="m", read_timeout=5
        )
    assert runtime.requests == []


def test_the_callers_request_id_reaches_the_runtime_from_the_runtime_loop(runtime):
    with requestid.bound(request="call-7"):
        runtime_client.generate_at(_endpoint(runtime), "test-model", "hi", {})
        runtime_client.generate("test-model", "hi", should_stop=lambda: False)
    assert [r.headers.get("X-Request-ID") for r in runtime.generate_requests()] == ["call-7"] * 2


def test_a_get_sends_no_body(runtime):
    runtime_client.list_models(_endpoint(runtime))
    [sent] = runtime.requests
    assert sent.method == "GET" and sent.body is None
    assert "Content-Length" not in sent.headers


def test_cookies_a_runtime_sets_are_never_sent_back(runtime):
    runtime.response_headers = {"Set-Cookie": "route=node-1; Path=/"}
    for _ in range(2):
        runtime_client.generate_at(routing.default_endpoint(), "test-model", "hi", {})
    first, second = runtime.generate_requests()
    assert "Cookie" not in first.headers and "Cookie" not in second.headers


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_the_server_hangs_up_on_before_answering_is_sent_again(runtime, stream):
    # A kept-alive connection the server closes just as the request goes out on it.
    hung_up = iter([Reply(hang_up=True), Reply(hang_up=True)])
    runtime.script = lambda prompt, body: next(hung_up, Reply(text="hello"))
    streamed = {"on_delta": lambda piece: None} if stream else {}
    generated = runtime_client.generate("test-model", "hi", **streamed)
    assert generated.text == "hello"
    assert len(runtime.generate_requests()) == 3


def test_a_server_that_keeps_hanging_up_is_unavailable(runtime):
    runtime.script = lambda prompt, body: Reply(hang_up=True)
    with pytest.raises(RuntimeUnavailable):
        runtime_client.generate_at(_endpoint(runtime), "test-model", "hi", {})
    assert len(runtime.generate_requests()) == 3
