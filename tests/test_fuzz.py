"""Property: whatever a client sends to any endpoint (any body, key, header, URL id, query
or method), the answer is never a 5xx and is always JSON in the envelope."""

import json
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

# Bounded: each test sends at most this many requests (a few seconds in all).
FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text of every kind: NUL, unpaired surrogates, control and astral characters, and often
# exactly the characters a database or an encoder chokes on.
text = st.text(st.characters(codec=None), max_size=30) | st.sampled_from(
    ["", "\x00", "a\x00b", "\ud800", "\udfff", "x\udc80", "\U0001f600", "\u202e"]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300)
    | st.floats()  # NaN and infinities included
    | text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


def json_bytes(value) -> bytes:
    """``value`` as a client could send it: NaN, Infinity and lone surrogates included."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def deeply_nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def bodies(fields: dict) -> st.SearchStrategy[bytes]:
    """Bodies from right to wrong: every field of the endpoint with a value of the right type
    (any text in a string) or any JSON, plus extra keys; any JSON; deep nesting; not JSON."""
    near_valid = st.fixed_dictionaries(
        {name: st.one_of(valid, valid, json_values) for name, valid in fields.items()}
    )
    extra = st.dictionaries(text, json_values, max_size=2)
    return st.one_of(
        st.builds(lambda a, b: json_bytes({**a, **b}), near_valid, extra),
        near_valid.map(json_bytes),
        json_values.map(json_bytes),
        st.integers(min_value=60, max_value=5000).map(deeply_nested),
        st.binary(max_size=64),
        st.sampled_from([b"", b"{", b'{"a": NaN}', b'{"a": 1e999}', b"9" * 5000]),
    )


def url_part(value: str) -> str:
    return quote_from_bytes(value.encode("utf-8", "surrogatepass"), safe="")


def assert_envelope(response) -> None:
    assert response.status_code < 500, response.content
    if response.request["REQUEST_METHOD"] == "HEAD":
        assert response.content == b""  # a HEAD answer has headers only
        return
    assert response["Content-Type"].startswith("application/json"), response.content
    body = response.json()
    if body.get("ok") is True:
        assert response.status_code < 300
        return
    assert body["ok"] is False and response.status_code >= 400
    assert isinstance(body["error"], str) and body["error"]
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["details"], dict)


def credentials(plain: str) -> st.SearchStrategy[dict]:
    """Headers from none to a live key, through any text in either header."""
    return st.one_of(
        st.just({}),
        st.just({"HTTP_AUTHORIZATION": f"Bearer {plain}"}),
        st.just({"HTTP_X_API_KEY": plain}),
        text.map(lambda t: {"HTTP_AUTHORIZATION": t}),
        text.map(lambda t: {"HTTP_AUTHORIZATION": f"Bearer {t}"}),
        text.map(lambda t: {"HTTP_X_API_KEY": t}),
        text.map(lambda t: {"HTTP_AUTHORIZATION": f"Bearer {plain}{t}"}),
    )


content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/plain", "application/x+json"]
)
methods = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])


@FUZZ
@given(data=st.data())
def test_api_php_answers_any_body_in_the_envelope(api_key, runtime, data):
    fields = {
        "api_key": st.sampled_from([api_key, api_key, "llmgw_x_y"]) | text,
        "model": st.sampled_from(["test-model", "missing-model"]) | text,
        "prompt": text,
        "options": st.dictionaries(
            st.sampled_from(["temperature", "top_p", "num_predict", "stop", "seed"]) | text,
            json_values,
            max_size=3,
        ),
    }
    body = data.draw(bodies(fields))
    response = APIClient().post("/api.php", data=body, content_type="application/json")
    assert_envelope(response)


AGENT_FIELDS = {
    "source": st.just("web") | text,
    "scope_type": st.just("user") | text,
    "scope_id": st.integers() | text,
    "prompt": text,
    "task": text,
    "profile": st.just("default") | text,
}


@FUZZ
@given(data=st.data())
@pytest.mark.parametrize(
    ("path", "fields"), [("/agent/chat", "prompt"), ("/agent/job/start", "task")]
)
def test_starting_agent_work_answers_any_body_in_the_envelope(agent_client, path, fields, data):
    names = ("source", "scope_type", "scope_id", fields)
    optional = {"profile": AGENT_FIELDS["profile"]} if data.draw(st.booleans()) else {}
    body = data.draw(bodies({**{n: AGENT_FIELDS[n] for n in names}, **optional}))
    response = agent_client.post(path, data=body, content_type="application/json")
    assert_envelope(response)


@FUZZ
@given(data=st.data())
@pytest.mark.parametrize("path", ["/agent/chat", "/agent/job/start"])
def test_starting_agent_work_answers_any_key_method_and_type_in_the_envelope(api_key, path, data):
    body = {"source": "web", "scope_type": "user", "scope_id": 7, "prompt": "Hi", "task": "Hi"}
    response = APIClient().generic(
        data.draw(methods),
        path,
        data=json_bytes(body),
        content_type=data.draw(content_types),
        **data.draw(credentials(api_key)),
    )
    assert_envelope(response)


@FUZZ
@given(data=st.data())
def test_reading_jobs_and_conversations_answers_any_id_in_the_envelope(agent_client, data):
    started = agent_client.post(
        "/agent/chat",
        {"source": "web", "scope_type": "user", "scope_id": 1, "prompt": "Hi"},
        format="json",
    ).json()["data"]
    job_id = data.draw(st.just(started["job_id"]) | text)
    conversation_id = data.draw(st.just(started["conversation_id"]) | text)
    query = data.draw(
        st.dictionaries(
            st.sampled_from(["limit", "before"]) | text, text | st.integers(), max_size=3
        )
    )
    query_string = "&".join(f"{url_part(str(k))}={url_part(str(v))}" for k, v in query.items())
    for method, path in [
        (data.draw(methods), f"/agent/job/{url_part(job_id)}"),
        (data.draw(methods), f"/agent/job/{url_part(job_id)}/cancel"),
        (data.draw(methods), f"/agent/conversation/{url_part(conversation_id)}?{query_string}"),
    ]:
        assert_envelope(agent_client.generic(method, path))


@FUZZ
@given(path=text, method=methods)
def test_any_other_path_answers_the_envelope(client, path, method):
    response = client.generic(method, "/" + url_part(path))
    if response.status_code in (301, 302) or response["Content-Type"].startswith("text/html"):
        # The admin (and a path that turns out to be one of its pages) answers HTML.
        assert response.status_code < 500
        return
    assert_envelope(response)
