"""The production server against slow, greedy and odd clients: time limits for headers and
body (408), a limit of connections per client address (429), its own refusals in the
envelope, a Content-Length for HTTP/1.0, the host checked on /api.php, and no key in its
access log."""

import json
import socket
import time

import pytest

from core.exceptions import InvalidApiKey
from gateway import keys, services
from tests.factories import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web(start_web):
    return start_web(
        WEB_CONCURRENCY="1",
        WEB_HEADER_TIMEOUT="1",
        WEB_BODY_TIMEOUT="1",
        WEB_MAX_CONNECTIONS_PER_CLIENT="4",
    )


def connect(web) -> socket.socket:
    return socket.create_connection(("127.0.0.1", web.port), timeout=10)


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Reads until the server closes: status, headers (lower-case names), body."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(status_line.split()[1]), headers, body


def dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        length = int(size, 16)
        if not length:
            break
        out, data = out + data[:length], data[length + 2 :]
    return out


def test_a_client_that_never_finishes_its_headers_gets_408_and_is_closed(web):
    with connect(web) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        status, headers, body = read_answer(sock)
    assert status == 408
    assert json.loads(body)["error"] == "request_timeout"
    assert headers["connection"] == "close"
    assert time.monotonic() - started < 8


def test_a_chunked_body_that_never_ends_gets_408_and_is_closed(web, make_key):
    with connect(web) as sock:
        sock.sendall(
            b"POST /api.php HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n'
        )
        status, _, body = read_answer(sock)
    assert status == 408
    assert json.loads(body)["error"] == "request_timeout"


def test_one_address_may_hold_only_so_many_connections(web):
    held = [connect(web) for _ in range(4)]
    try:
        for sock in held:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            sock.recv(65536)
        with connect(web) as extra:
            status, headers, body = read_answer(extra)
        assert status == 429
        assert json.loads(body)["error"] == "too_many_connections"
        assert headers["retry-after"] == "1"
    finally:
        for sock in held:
            sock.close()

    def served_again() -> bool:
        # The closes reach the server in their own time (later on a busy machine): until
        # then a new connection is still one too many.
        with connect(web) as again:
            again.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return read_answer(again)[0] == 200

    wait_for(served_again, what="a connection to be served once the others closed")


def test_a_request_that_is_not_http_is_refused_in_the_envelope(web):
    with connect(web) as sock:
        sock.sendall(b"HELLO THERE\r\n\r\n")
        status, headers, body = read_answer(sock)
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["error"] == "bad_request"


def test_an_http_1_0_client_gets_a_content_length_not_a_chunked_answer(web, make_key):
    _, plain = make_key()
    body = json.dumps({"api_key": plain, "model": "test-model", "prompt": "hi"}).encode()
    with connect(web) as sock:
        sock.sendall(
            b"POST /api.php HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status, headers, answer = read_answer(sock)
    assert status == 200, answer
    assert "transfer-encoding" not in headers
    assert int(headers["content-length"]) == len(answer)
    assert json.loads(answer)["ok"] is True


def test_api_php_checks_the_host_like_every_path(web, make_key):
    _, plain = make_key()
    body = json.dumps({"api_key": plain, "model": "test-model", "prompt": "hi"}).encode()
    with connect(web) as sock:
        sock.sendall(
            b"POST /api.php HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status, _, answer = read_answer(sock)
    assert status == 400
    assert json.loads(answer)["error"] == "bad_request"


def test_a_key_sent_in_the_query_string_never_reaches_the_access_log(start_web, make_key):
    web = start_web(WEB_CONCURRENCY="1", LOG_LEVEL="INFO")  # access lines are INFO
    _, plain = make_key()
    with connect(web) as sock:
        sock.sendall(
            b"GET /agent/job/job_x?api_key=%s&key=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Connection: close\r\n\r\n" % (plain.encode(), plain.encode())
        )
        read_answer(sock)
    wait_for(lambda: "/agent/job/job_x" in web.output(), what="the access log line")
    log = web.output()
    secret = plain.rsplit("_", 1)[1]
    assert secret not in log


def test_refusing_a_key_whose_prefix_is_unknown_compares_a_digest_too(db, monkeypatch):
    compared = []
    matches = keys.matches
    monkeypatch.setattr(keys, "matches", lambda *args: compared.append(1) or matches(*args))
    with pytest.raises(InvalidApiKey):
        services.api_key_authenticate(keys.generate().plain)
    assert compared == [1]


def test_an_http_1_0_client_refused_for_its_host_gets_a_content_length_too(web):
    with connect(web) as sock:
        sock.sendall(b"POST /api.php HTTP/1.0\r\nHost: evil.example\r\nContent-Length: 0\r\n\r\n")
        status, headers, answer = read_answer(sock)
    assert status == 400
    assert "transfer-encoding" not in headers
    assert int(headers["content-length"]) == len(answer)
    assert json.loads(answer)["error"] == "bad_request"
