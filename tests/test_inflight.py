"""POST /api.php under the production server's request path (uvicorn serving config.asgi):
many model calls in flight in one process, no database connection held while they wait,
and a client that goes away cancels its call."""

import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db.backends.signals import connection_created

from config import short_route
from gateway.models import UsageRecord
from tests.asgi import IN_FLIGHT, hold_slow_calls, post
from tests.factories import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_many_slow_calls_are_in_flight_at_once_and_a_fast_call_is_not_blocked(
    asgi_server, runtime, make_key, settings
):
    _, key = make_key()
    release = hold_slow_calls(runtime, settings)
    slow = {"api_key": key, "model": "test-model", "prompt": "slow"}
    with ThreadPoolExecutor(IN_FLIGHT) as clients:
        calls = [clients.submit(post, asgi_server, slow) for _ in range(IN_FLIGHT)]
        wait_for(lambda: len(runtime.generate_requests()) == IN_FLIGHT, what="calls in flight")
        status, body = post(asgi_server, {**slow, "prompt": "fast"})
        assert (status, body["response"]) == (200, "quick")
        assert not any(call.done() for call in calls)  # all still waiting on the model
        release.set()
        answers = [call.result() for call in calls]
    assert [(status, body["response"]) for status, body in answers] == [(200, "late")] * IN_FLIGHT
    assert UsageRecord.objects.filter(status=200).count() == IN_FLIGHT + 1


def test_the_calls_in_flight_share_the_short_routes_threads_instead_of_a_thread_each(
    asgi_server, runtime, make_key, settings
):
    _, key = make_key()
    release = hold_slow_calls(runtime, settings)
    threads: set[str] = set()

    def seen(**kwargs) -> None:  # sent in the thread that opens (or takes) a connection
        threads.add(threading.current_thread().name)

    short_route.give_back_connections()  # kept from earlier tests: each is taken anew
    connection_created.connect(seen, weak=False)
    try:
        slow = {"api_key": key, "model": "test-model", "prompt": "slow"}
        with ThreadPoolExecutor(IN_FLIGHT) as clients:
            calls = [clients.submit(post, asgi_server, slow) for _ in range(IN_FLIGHT)]
            wait_for(lambda: len(runtime.generate_requests()) == IN_FLIGHT, what="calls in flight")
            release.set()
            assert [call.result()[0] for call in calls] == [200] * IN_FLIGHT
    finally:
        connection_created.disconnect(seen)
    assert 1 <= len(threads) <= short_route.THREADS < IN_FLIGHT
    assert all(name.startswith("short") for name in threads)
    assert UsageRecord.objects.filter(status=200).count() == IN_FLIGHT


def test_a_client_that_goes_away_closes_its_runtime_call_and_is_recorded_cancelled(
    asgi_server, runtime, make_key
):
    from tests.runtime_server import Reply

    _, key = make_key()
    runtime.script = lambda prompt, body: Reply(text="too late", delay=30)
    payload = json.dumps({"api_key": key, "model": "test-model", "prompt": "p"}).encode()
    with socket.create_connection(asgi_server) as client:
        client.sendall(
            b"POST /api.php HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
        )
        wait_for(lambda: runtime.generate_requests(), what="the call to reach the runtime")
    wait_for(lambda: runtime.closed_early == 1, what="the runtime to see the hang-up")
    record = wait_for(lambda: UsageRecord.objects.filter(error="cancelled").first())
    assert record.status == 499
    assert UsageRecord.objects.count() == 1


def test_the_admin_logs_in_and_keeps_its_session_under_the_asgi_server(
    asgi_server, plain_static_storage
):
    import re

    import requests
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password-9")
    base = f"http://{asgi_server[0]}:{asgi_server[1]}"
    with requests.Session() as browser:
        form = browser.get(f"{base}/admin/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        answer = browser.post(
            f"{base}/admin/login/?next=/admin/",
            data={
                "username": "root",
                "password": "a-long-password-9",
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": f"{base}/admin/login/"},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.url == f"{base}/admin/"
        assert "sessionid" in browser.cookies
        assert browser.get(f"{base}/admin/", timeout=30).status_code == 200


def test_a_connection_beyond_a_web_process_limit_is_answered_in_the_envelope(
    start_web, runtime, make_key, settings
):
    from tests.live import request

    _, key = make_key()
    release = hold_slow_calls(runtime, settings)
    # uvicorn counts the connection being answered too: a limit of 2 takes one call more.
    web = start_web(WEB_CONCURRENCY="1", GUNICORN_WORKER_CONNECTIONS="2")
    slow = {"api_key": key, "model": "test-model", "prompt": "slow"}
    with ThreadPoolExecutor(1) as client:
        call = client.submit(request, web.url, "POST", "/api.php", slow)
        wait_for(lambda: len(runtime.generate_requests()) == 1, what="the slow call in flight")
        status, body = request(web.url, "GET", "/healthz")
        release.set()
        assert call.result()[0] == 200
    assert status == 503
    assert body == {
        "ok": False,
        "error": "server_busy",
        "message": "The server is at its limit of connections; try again shortly.",
        "details": {},
    }


def test_the_stateless_endpoint_runs_a_short_chain_with_the_same_headers_and_body_limit(
    asgi_server, runtime, make_key, settings, plain_static_storage
):
    import requests

    _, key = make_key()
    base = f"http://{asgi_server[0]}:{asgi_server[1]}"
    body = {"api_key": key, "model": "test-model", "prompt": "hi"}
    answer = requests.post(f"{base}/api.php", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert answer.headers["Referrer-Policy"] == "same-origin"
    assert "Set-Cookie" not in answer.headers and "X-Frame-Options" not in answer.headers
    too_big = b"x" * (settings.MAX_BODY_BYTES + 1)
    refused = requests.post(
        f"{base}/api.php", data=too_big, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert (refused.status_code, refused.json()["error"]) == (413, "payload_too_large")
    # Every other path keeps the whole chain.
    page = requests.get(f"{base}/admin/login/", timeout=30)
    assert page.headers["X-Frame-Options"] == "DENY" and "csrftoken" in page.cookies


def test_the_stateless_handler_answers_every_refusal_in_the_envelope(asgi_server, runtime):
    import requests

    url = f"http://{asgi_server[0]}:{asgi_server[1]}/api.php"
    wrong_method = requests.get(url, timeout=30)
    assert (wrong_method.status_code, wrong_method.json()["error"]) == (405, "method_not_allowed")
    assert wrong_method.headers["Allow"] == "POST"
    not_json = requests.post(
        url, data=b"{not json", headers={"Content-Type": "application/json"}, timeout=30
    )
    assert (not_json.status_code, not_json.json()["error"]) == (400, "invalid_json")
    bad_key = requests.post(url, json={"api_key": "nope", "model": "m", "prompt": "p"}, timeout=30)
    assert (bad_key.status_code, bad_key.json()["error"]) == (401, "invalid_api_key")
    assert runtime.generate_requests() == []
    assert UsageRecord.objects.count() == 0
