"""The database out of reach: every path answers 503 ``database_unavailable`` with
``Retry-After`` (the envelope; a page of its own in the admin), never a 500.

The production server runs on a PostgreSQL address where nothing listens."""

import http.client
import json

import psycopg
import pytest
from django.db import OperationalError

from core import errors
from gateway import keys

KEY = keys.generate().plain  # well formed: its look-up needs the database


@pytest.fixture
def web(start_web, unused_port):
    return start_web(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{unused_port}/nowhere",
        DB_POOL_TIMEOUT="1",
    )


def call(url: str, method: str, path: str, body=None, key: str = ""):
    """One request: (status, body text, headers)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        conn.request(method, path, None if body is None else json.dumps(body), headers)
        response = conn.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, response.read().decode(), headers
    finally:
        conn.close()


def assert_unavailable(status: int, text: str, headers) -> None:
    body = json.loads(text)
    assert status == 503, body
    assert body["error"] == "database_unavailable"
    assert body["ok"] is False
    assert int(headers["retry-after"]) >= 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the server's teardown looks at the test database
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api.php", {"api_key": KEY, "model": "m", "prompt": "hi"}),
        ("POST", "/agent/chat", {"source": "s", "scope_type": "t", "scope_id": 1, "prompt": "hi"}),
        ("GET", "/agent/job/job_01ABC", None),
    ],
)
def test_every_api_path_answers_database_unavailable_when_postgresql_is_out_of_reach(
    web, method, path, body
):
    assert_unavailable(*call(web.url, method, path, body, key=KEY))


def test_an_admin_page_whose_database_is_out_of_reach_says_so_not_server_error(rf):
    request = rf.get("/admin/agents/job/")
    try:
        raise OperationalError("connection failed") from psycopg.OperationalError("refused")
    except OperationalError:
        response = errors.handler500(request)
    assert response.status_code == 503
    assert "database cannot be reached" in response.content.decode()
    assert int(response["Retry-After"]) >= 1


def test_a_statement_error_is_still_a_server_error(rf):
    request = rf.get("/admin/agents/job/")
    try:
        raise OperationalError("division by zero") from psycopg.errors.DivisionByZero("no")
    except OperationalError:
        response = errors.handler500(request)
    assert response.status_code == 500
