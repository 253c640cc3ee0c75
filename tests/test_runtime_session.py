"""The runtime client's HTTP session: what goes over the wire, against the loopback runtime."""

import json

import pytest
import requests

from gateway import routing, session
from gateway import runtime as runtime_client

pytestmark = pytest.mark.django_db


def test_a_json_post_carries_the_body_and_the_headers_requests_would_send(runtime_server):
    runtime_server.reset()
    url = f"{runtime_server.url}/api/generate"
    body = {"model": "test-model", "prompt": "naïve ☕\n", "stream": False, "options": {"seed": 1}}
    ours = session.make_session().post(url, json=body, headers={"Authorization": "Bearer k"})
    theirs = requests.Session().post(url, json=body, headers={"Authorization": "Bearer k"})
    assert ours.status_code == theirs.status_code == 200
    sent_ours, sent_theirs = runtime_server.requests
    assert sent_ours.body == sent_theirs.body == body
    assert {k.lower(): v for k, v in sent_ours.headers.items()} == {
        k.lower(): v for k, v in sent_theirs.headers.items()
    }
    assert sent_ours.headers["Content-Type"] == "application/json"


def test_a_prepared_body_is_the_utf8_json_of_the_object():
    prepared = session.make_session().prepare_request(
        requests.Request("POST", "http://127.0.0.1:1/x", json={"p": "é"})
    )
    assert json.loads(prepared.body.decode("utf-8")) == {"p": "é"}
    assert prepared.headers["Content-Length"] == str(len(prepared.body))


def test_a_body_with_nan_is_refused_as_requests_refuses_it():
    with pytest.raises(ValueError):
        session.make_session().prepare_request(
            requests.Request("POST", "http://127.0.0.1:1/x", json={"t": float("nan")})
        )


def test_a_request_outside_the_simple_shape_is_prepared_by_requests():
    prepared = session.make_session().prepare_request(
        requests.Request("GET", "http://127.0.0.1:1/x", params={"q": "a b"})
    )
    assert prepared.url == "http://127.0.0.1:1/x?q=a+b"


def test_a_get_sends_no_body(runtime_server):
    runtime_server.reset()
    response = session.make_session().get(f"{runtime_server.url}/api/tags")
    assert response.status_code == 200
    [sent] = runtime_server.requests
    assert sent.method == "GET" and sent.body is None
    assert "Content-Length" not in sent.headers


def test_cookies_a_runtime_sets_are_never_sent_back(runtime):
    runtime.response_headers = {"Set-Cookie": "route=node-1; Path=/"}
    for _ in range(2):
        runtime_client.generate_at(routing.default_endpoint(), "test-model", "hi", {})
    first, second = runtime.generate_requests()
    assert "Cookie" not in first.headers and "Cookie" not in second.headers
