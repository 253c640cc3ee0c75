"""GET /agent/conversation/{id}/events: a conversation's messages and its replies' tokens as
server-sent events, read with an SSE client (httpx-sse) through the production request path
(uvicorn serving config.asgi) while a real cluster runs the chats."""

import json
from collections.abc import Iterator

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse

from tests.envelope import assert_error
from tests.factories import default_profile
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)
SCOPE = {"source": "web", "scope_type": "user", "scope_id": "s1"}


@pytest.fixture
def base(asgi_server) -> str:
    host, port = asgi_server
    return f"http://{host}:{port}"


@pytest.fixture
def http(api_key) -> Iterator[httpx.Client]:
    with httpx.Client(headers={"Authorization": f"Bearer {api_key}"}, timeout=30) as client:
        yield client


@pytest.fixture
def cluster(start_cluster, runtime):
    default_profile()
    return start_cluster()


def chat(http: httpx.Client, base: str, prompt: str) -> dict:
    answer = http.post(f"{base}/agent/chat", json={**SCOPE, "prompt": prompt})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def until_reply(events: Iterator[ServerSentEvent]) -> list[ServerSentEvent]:
    """The events up to and including the next assistant message."""
    seen = []
    for event in events:
        seen.append(event)
        if event.event == "message" and json.loads(event.data)["role"] == "assistant":
            return seen
    raise AssertionError(f"the stream ended first: {seen}")


def wait_finished(http: httpx.Client, base: str, job_id: str) -> None:
    from tests.factories import wait_for

    wait_for(
        lambda: http.get(f"{base}/agent/job/{job_id}").json()["data"]["status"] == "finished",
        what="the chat to finish",
    )


def test_the_stream_sends_new_messages_and_the_tokens_of_the_reply(http, base, cluster, runtime):
    runtime.script = lambda prompt, body: Reply(text="First answer.")
    first = chat(http, base, "hello")
    wait_finished(http, base, first["job_id"])
    conversation_id = first["conversation_id"]
    reply = "Blue skies here. Warm later on. Rain by Friday."
    runtime.script = lambda prompt, body: Reply(text=reply, chunk_delay=0.1)

    url = f"{base}/agent/conversation/{conversation_id}/events"
    with connect_sse(http, "GET", url) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        assert source.response.headers["cache-control"] == "no-cache"
        second = chat(http, base, "weather?")
        events = until_reply(source.iter_sse())

    ids = [int(event.id) for event in events]
    assert ids == sorted(set(ids)) and ids[0] > 0
    messages = [json.loads(e.data) for e in events if e.event == "message"]
    assert [(m["role"], m["content"], m["seq"]) for m in messages] == [
        ("user", "weather?", 3),
        ("assistant", reply, 4),
    ]
    assert all(set(m) == {"role", "content", "created_at", "seq"} for m in messages)
    tokens = [json.loads(e.data) for e in events if e.event == "token"]
    assert len(tokens) > 1
    assert "".join(t["text"] for t in tokens) == reply
    assert {e.event for e in events} == {"message", "token"}
    # The reply's tokens come between its question and the stored reply.
    kinds = [e.event for e in events]
    assert kinds[0] == "message" and kinds[-1] == "message"
    stored = http.get(f"{base}/agent/conversation/{conversation_id}").json()["data"]["messages"]
    assert stored[-1]["content"] == messages[-1]["content"]
    assert stored[-1]["created_at"] == messages[-1]["created_at"]
    wait_finished(http, base, second["job_id"])


def test_last_event_id_resumes_after_that_event_without_loss_or_repetition(
    http, base, cluster, runtime
):
    runtime.script = lambda prompt, body: Reply(text="One. Two. Three. Four.", chunk_delay=0.1)
    first = chat(http, base, "count")
    conversation_id = first["conversation_id"]
    url = f"{base}/agent/conversation/{conversation_id}/events"
    wait_finished(http, base, first["job_id"])
    # The whole history of events since the start: from id 0.
    with connect_sse(http, "GET", url, headers={"Last-Event-ID": "0"}) as source:
        everything = until_reply(source.iter_sse())
    assert everything[0].event == "message"
    assert json.loads(everything[0].data)["content"] == "count"

    middle = everything[len(everything) // 2]
    with connect_sse(http, "GET", url, headers={"Last-Event-ID": middle.id}) as source:
        rest = until_reply(source.iter_sse())
    after = everything[len(everything) // 2 + 1 :]
    assert [(e.id, e.event, e.data) for e in rest] == [(e.id, e.event, e.data) for e in after]

    with connect_sse(http, "GET", f"{url}?last_event_id={middle.id}") as source:
        again = until_reply(source.iter_sse())
    assert [e.id for e in again] == [e.id for e in after]


def test_a_stream_opened_mid_reply_continues_it(http, base, cluster, runtime):
    text = " ".join(f"Line {n}." for n in range(30))
    runtime.script = lambda prompt, body: Reply(text=text, chunk_delay=0.05)
    started = chat(http, base, "talk")
    url = f"{base}/agent/conversation/{started['conversation_id']}/events"
    with connect_sse(http, "GET", url, headers={"Last-Event-ID": "0"}) as source:
        events = source.iter_sse()
        next(e for e in events if e.event == "token")
        with connect_sse(http, "GET", url) as late:
            late_events = until_reply(late.iter_sse())
        until_reply(events)
    # A window that opens during a reply gets what is new from then on: more tokens, the reply.
    assert late_events[-1].event == "message"
    assert {e.event for e in late_events[:-1]} <= {"token"}


def test_another_owners_conversation_is_404_in_the_envelope(asgi_client, make_key, runtime):
    from conversations import services
    from tests.factories import default_profile as profile

    profile()
    alice, _ = make_key(name="alice", scopes=("agent",))
    _, bob = make_key(name="bob", scopes=("agent",))
    conversation = services.conversation_get_or_create(
        owner_id=alice.owner_id, profile=profile(), **SCOPE
    )
    answer = asgi_client.get(
        f"/agent/conversation/{conversation.pk}/events",
        headers={"Authorization": f"Bearer {bob}"},
    )
    assert_error(answer, 404, "conversation_not_found")


def test_a_bad_key_is_401_and_a_model_only_key_403(asgi_client, make_key):
    answer = asgi_client.get(
        "/agent/conversation/conv_x/events", headers={"Authorization": "Bearer nope"}
    )
    assert_error(answer, 401, "invalid_api_key")
    _, model_only = make_key(name="m", scopes=("model",))
    answer = asgi_client.get(
        "/agent/conversation/conv_x/events", headers={"Authorization": f"Bearer {model_only}"}
    )
    assert_error(answer, 403, "forbidden")


@pytest.mark.parametrize("bad", ["-1", "abc", "1.5", "+3"])
def test_a_last_event_id_that_is_not_a_non_negative_integer_is_400(
    asgi_client, make_key, runtime, bad
):
    from conversations import services

    key, plain = make_key(scopes=("agent",))
    conversation = services.conversation_get_or_create(
        owner_id=key.owner_id, profile=default_profile(), **SCOPE
    )
    answer = asgi_client.get(
        f"/agent/conversation/{conversation.pk}/events",
        headers={"Authorization": f"Bearer {plain}", "Last-Event-ID": bad},
    )
    assert_error(answer, 400, "validation_error")


# --- What is streamed is what is kept ------------------------------------------------------

BORROWING = "I'm sorry, but you don't have a bike in the shed."  # the default example's facts


def shown_text(events: list[tuple[str, dict]]) -> tuple[str, dict[int, str]]:
    """What a chat window shows of a reply, following the stream as docs/events.md says: a
    step's tokens are appended to its text, a ``discard`` takes that step's text back. The
    text left, and the discarded steps' texts."""
    texts: dict[int, str] = {}
    dropped: dict[int, str] = {}
    for kind, data in events:
        if kind == "token":
            texts[data["step"]] = texts.get(data["step"], "") + data["text"]
        elif kind == "discard":
            dropped[data["step"]] = texts.pop(data["step"], "")
    assert len(texts) == 1, texts  # one step's text is left: the reply's
    return next(iter(texts.values())), dropped


def job_stream(http: httpx.Client, base: str, job_id: str) -> list[tuple[str, dict]]:
    with connect_sse(http, "GET", f"{base}/agent/job/{job_id}/events") as source:
        return [(e.event, json.loads(e.data)) for e in source.iter_sse() if e.data]


@pytest.mark.parametrize(
    ("answers", "kept", "discarded"),
    [
        # The first answer is kept.
        ((None, "It is in the garage."), "It is in the garage.", 0),
        # It borrows from the example: asked again, the second one is kept.
        ((BORROWING, "Your car is in the garage."), "Your car is in the garage.", 1),
        # It keeps borrowing: the profile's unknown_reply is the reply, with what the user
        # said about it quoted.
        ((BORROWING, BORROWING), "I don't know. You told me: “I parked my car in the garage.”", 3),
    ],
    ids=["first-kept", "retry-kept", "unknown-reply"],
)
def test_the_streamed_reply_is_the_stored_one_and_a_discarded_attempt_is_marked(
    http, base, cluster, runtime, answers, kept, discarded
):
    greedy, retry = answers

    calls: list[str] = []

    def script(prompt: str, body: dict) -> Reply:  # the first answer, then the retries'
        calls.append(retry if calls or greedy is None else greedy)
        return Reply(text=calls[-1], chunk_delay=0.02)

    runtime.script = lambda prompt, body: Reply(text="Noted.")
    first = chat(http, base, "I parked my car in the garage.")  # what the answers say
    wait_finished(http, base, first["job_id"])
    runtime.script = script
    url = f"{base}/agent/conversation/{first['conversation_id']}/events"
    with connect_sse(http, "GET", url) as source:  # live, opened before the chat
        second = chat(http, base, "Where is my car?")
        live = until_reply(source.iter_sse())
    wait_finished(http, base, second["job_id"])
    stored = http.get(f"{base}/agent/conversation/{first['conversation_id']}").json()
    assert stored["data"]["messages"][-1]["content"] == kept

    # The conversation's stream: the text left once the discarded steps are taken back is
    # the stored reply, which its message event then carries.
    events = [(e.event, json.loads(e.data)) for e in live]
    assert events[-1] == ("message", stored["data"]["messages"][-1])
    text, dropped = shown_text(events[:-1])
    assert text == kept and len(dropped) == discarded
    assert all(t == BORROWING for t in dropped.values())
    ids = [int(e.id) for e in live]
    assert ids == sorted(set(ids))

    # The job's stream: the tokens of the step that produced the reply are the reply; each
    # rejected attempt's step is sent again, ended, with output.discarded.
    job = job_stream(http, base, second["job_id"])
    marks = [d for kind, d in job if kind == "step" and "discarded" in d["output"]]
    assert [m["output"]["discarded"] for m in marks] == ["borrowed"] * discarded
    assert all(m["status"] == "finished" and m["name"] == "reply" for m in marks)
    by_step: dict[int, str] = {}
    for kind, data in job:
        if kind == "token":
            by_step[data["step"]] = by_step.get(data["step"], "") + data["text"]
    producing = [step for step in by_step if step not in {m["index"] for m in marks}]
    assert [by_step[step] for step in producing] == [kept]
    assert job[-1][1]["final_result"]["message"]["content"] == kept
    names = {d["index"]: d["name"] for kind, d in job if kind == "step"}
    assert names[producing[0]] == ("reply_replaced" if discarded == 3 else "reply")


def test_clients_that_open_a_conversation_stream_and_leave_leave_no_watch_or_task(
    asgi_server, make_key, runtime
):
    from conversations import services
    from tests.factories import wait_for
    from tests.live import bus_state

    key, api_key = make_key(scopes=("agent",))
    conversation = services.conversation_get_or_create(
        owner_id=key.owner_id, profile=default_profile(), **SCOPE
    )
    services.messages_import(conversation=conversation, messages=[("user", "Hello.")])
    host, port = asgi_server
    url = f"http://{host}:{port}/agent/conversation/{conversation.pk}/events"
    headers = {"Authorization": f"Bearer {api_key}", "Last-Event-ID": "0"}

    def connect_and_leave() -> None:
        with (
            httpx.Client(timeout=30) as client,
            connect_sse(client, "GET", url, headers=headers) as sse,
        ):
            assert json.loads(next(sse.iter_sse()).data)["content"] == "Hello."

    connect_and_leave()
    idle = wait_for(lambda: (s := bus_state())[:2] == (0, 0) and s, what="the bus to stop")
    for _ in range(500):
        connect_and_leave()
    wait_for(lambda: bus_state() == idle, what="the streams and the bus to be gone")
