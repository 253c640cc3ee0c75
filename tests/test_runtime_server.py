"""Self-tests of the fake model runtime in ``tests/runtime_server.py`` (no Django needed)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator

import pytest
import requests

from tests.runtime_server import Reply, RuntimeServer, split_chunks

MODEL = "test-model"


@pytest.fixture
def runtime() -> Iterator[RuntimeServer]:
    with RuntimeServer() as server:
        yield server


def sse_events(response: requests.Response) -> list[str]:
    """The ``data:`` payloads of a server-sent-events response."""
    lines = response.iter_lines(decode_unicode=True)
    return [line[len("data: ") :] for line in lines if line.startswith("data: ")]


def wait_until(condition, timeout: float = 30.0) -> bool:
    """Polls ``condition``; generous, since a busy machine is slow (a pass never waits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_it_answers_ollama_generate_without_streaming(runtime: RuntimeServer) -> None:
    response = requests.post(
        f"{runtime.url}/api/generate",
        json={"model": MODEL, "prompt": "hello there", "stream": False},
        timeout=5,
    )

    assert response.status_code == 200
    data = response.json()
    assert data["model"] == MODEL
    assert data["response"] == "echo: hello there"
    assert data["done"] is True
    assert data["done_reason"] == "stop"
    assert data["context"] == [1, 2, 3]
    assert (data["prompt_eval_count"], data["eval_count"]) == (2, 3)
    assert data["total_duration"] > 0 and data["eval_duration"] > 0
    assert data["created_at"].endswith("Z")


def test_it_streams_ollama_chunks_as_ndjson(runtime: RuntimeServer) -> None:
    runtime.script = lambda prompt, body: "one two  three"

    # Ollama streams unless told otherwise.
    with requests.post(
        f"{runtime.url}/api/generate", json={"model": MODEL, "prompt": "p"}, stream=True, timeout=5
    ) as response:
        assert response.headers["Content-Type"] == "application/x-ndjson"
        assert response.headers["Transfer-Encoding"] == "chunked"
        lines = [json.loads(line) for line in response.iter_lines()]

    assert [line["response"] for line in lines[:-1]] == ["one", " two", "  three"]
    assert all(line["done"] is False for line in lines[:-1])
    final = lines[-1]
    assert final["done"] is True and final["response"] == ""
    assert final["done_reason"] == "stop"
    assert (final["prompt_eval_count"], final["eval_count"]) == (1, 3)


def test_it_answers_openai_completions_and_chat_completions(runtime: RuntimeServer) -> None:
    completion = requests.post(
        f"{runtime.url}/v1/completions", json={"model": MODEL, "prompt": "a b"}, timeout=5
    ).json()
    chat = requests.post(
        f"{runtime.url}/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "first question"},
                {"role": "assistant", "content": "an answer"},
                {"role": "user", "content": "last question"},
            ],
        },
        timeout=5,
    ).json()

    assert completion["object"] == "text_completion"
    assert completion["choices"] == [
        {"index": 0, "text": "echo: a b", "finish_reason": "stop", "logprobs": None}
    ]
    assert completion["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"] == {"role": "assistant", "content": "echo: last question"}
    assert chat["choices"][0]["finish_reason"] == "stop"
    assert chat["model"] == MODEL


def test_it_streams_openai_chunks_as_server_sent_events(runtime: RuntimeServer) -> None:
    runtime.script = lambda prompt, body: Reply(text="abcdef", chunks=3)

    with requests.post(
        f"{runtime.url}/v1/completions",
        json={"model": MODEL, "prompt": "p", "stream": True},
        stream=True,
        timeout=5,
    ) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        completion_events = sse_events(response)
    with requests.post(
        f"{runtime.url}/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "p"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        stream=True,
        timeout=5,
    ) as response:
        chat_events = sse_events(response)

    assert completion_events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in completion_events[:-1]]
    assert [c["choices"][0]["text"] for c in chunks] == ["ab", "cd", "ef", ""]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, "stop"]

    assert chat_events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in chat_events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 2
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert "".join(d.get("content", "") for d in deltas) == "abcdef"
    assert deltas[0]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_the_script_sees_the_prompt_and_body_and_shapes_the_reply(runtime: RuntimeServer) -> None:
    seen: list[tuple[str, dict]] = []

    def script(prompt: str, body: dict) -> Reply:
        seen.append((prompt, body))
        return Reply(text="scripted answer", prompt_tokens=40, completion_tokens=7)

    runtime.script = script
    body = {"model": MODEL, "prompt": "the prompt", "stream": False, "options": {"seed": 1}}
    data = requests.post(f"{runtime.url}/api/generate", json=body, timeout=5).json()

    assert seen == [("the prompt", body)]
    assert data["response"] == "scripted answer"
    assert (data["prompt_eval_count"], data["eval_count"]) == (40, 7)

    runtime.script = lambda prompt, body: prompt.upper()
    data = requests.post(
        f"{runtime.url}/v1/completions", json={"model": MODEL, "prompt": "shout"}, timeout=5
    ).json()
    assert data["choices"][0]["text"] == "SHOUT"


def test_unknown_models_get_each_protocols_not_found_error(runtime: RuntimeServer) -> None:
    ollama = requests.post(
        f"{runtime.url}/api/generate", json={"model": "nope", "prompt": "x"}, timeout=5
    )
    openai = requests.post(
        f"{runtime.url}/v1/chat/completions",
        json={"model": "nope", "messages": [{"role": "user", "content": "x"}]},
        timeout=5,
    )

    assert ollama.status_code == 404
    assert ollama.json() == {"error": "model 'nope' not found, try pulling it first"}
    assert openai.status_code == 404
    assert openai.json() == {
        "error": {
            "message": "The model `nope` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }

    runtime.models.add("nope")
    ok = requests.post(
        f"{runtime.url}/api/generate",
        json={"model": "nope:latest", "prompt": "x", "stream": False},
        timeout=5,
    )
    assert ok.status_code == 200


def test_error_replies_use_the_status_and_the_paths_style(runtime: RuntimeServer) -> None:
    runtime.script = lambda prompt, body: Reply(status=503, error="server busy")

    ollama = requests.post(
        f"{runtime.url}/api/generate", json={"model": MODEL, "prompt": "x"}, timeout=5
    )
    openai = requests.post(
        f"{runtime.url}/v1/completions", json={"model": MODEL, "prompt": "x"}, timeout=5
    )

    assert ollama.status_code == 503
    assert ollama.json() == {"error": "server busy"}
    assert openai.status_code == 503
    assert openai.json() == {"error": {"message": "server busy", "type": "server_error"}}


def test_malformed_json_and_unknown_paths_are_rejected(runtime: RuntimeServer) -> None:
    headers = {"Content-Type": "application/json"}
    ollama = requests.post(f"{runtime.url}/api/generate", data="{oops", headers=headers, timeout=5)
    openai = requests.post(f"{runtime.url}/v1/completions", data="[1]", headers=headers, timeout=5)
    unknown = requests.get(f"{runtime.url}/api/nothing-here", timeout=5)

    assert ollama.status_code == 400 and isinstance(ollama.json()["error"], str)
    assert openai.status_code == 400 and "message" in openai.json()["error"]
    assert unknown.status_code == 404
    assert runtime.requests[0].body is None


def test_it_lists_models_and_answers_ollamas_health_checks(runtime: RuntimeServer) -> None:
    runtime.models.add("other")

    tags = requests.get(f"{runtime.url}/api/tags", timeout=5).json()
    models = requests.get(f"{runtime.url}/v1/models", timeout=5).json()
    root = requests.get(f"{runtime.url}/", timeout=5)
    version = requests.get(f"{runtime.url}/api/version", timeout=5).json()

    assert [m["name"] for m in tags["models"]] == ["other", MODEL]
    assert tags["models"][1] == {"name": MODEL, "model": MODEL, "size": 1, "details": {}}
    assert models["object"] == "list"
    assert {"id": MODEL, "object": "model", "created": 0, "owned_by": "test"} in models["data"]
    assert (root.status_code, root.text) == (200, "Ollama is running")
    assert version == {"version": "0.0.0-test"}


def test_tokenize_endpoints_count_words_and_can_be_switched_off(runtime: RuntimeServer) -> None:
    url = runtime.url
    ollama = requests.post(
        f"{url}/api/tokenize", json={"model": MODEL, "content": "a b c"}, timeout=5
    )
    llamacpp = requests.post(f"{url}/tokenize", json={"content": "a b c d"}, timeout=5)
    count = requests.post(f"{url}/extras/tokenize/count", json={"input": "a  b"}, timeout=5)

    assert len(ollama.json()["tokens"]) == 3
    assert len(llamacpp.json()["tokens"]) == 4
    assert llamacpp.json()["tokens"][:3] == ollama.json()["tokens"]
    assert count.json() == {"count": 2}

    runtime.tokenizer = False
    assert requests.post(f"{url}/tokenize", json={"content": "a"}, timeout=5).status_code == 404
    assert requests.post(f"{url}/api/tokenize", json={"content": "a"}, timeout=5).status_code == 404
    off = requests.post(f"{url}/extras/tokenize/count", json={"input": "a"}, timeout=5)
    assert off.status_code == 404


def test_it_records_every_request_in_order(runtime: RuntimeServer) -> None:
    with requests.Session() as session:
        session.get(f"{runtime.url}/api/tags", timeout=5)
        session.post(
            f"{runtime.url}/api/generate",
            json={"model": MODEL, "prompt": "first", "stream": False},
            headers={"Authorization": "Bearer secret"},
            timeout=5,
        )
        session.post(f"{runtime.url}/tokenize", json={"content": "x"}, timeout=5)
        session.post(
            f"{runtime.url}/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "second"}]},
            timeout=5,
        )

    assert [(r.method, r.path) for r in runtime.requests] == [
        ("GET", "/api/tags"),
        ("POST", "/api/generate"),
        ("POST", "/tokenize"),
        ("POST", "/v1/chat/completions"),
    ]
    generate = runtime.generate_requests()
    assert [r.path for r in generate] == ["/api/generate", "/v1/chat/completions"]
    assert generate[0].headers["authorization"] == "Bearer secret"
    assert generate[0].body == {"model": MODEL, "prompt": "first", "stream": False}
    assert runtime.prompts() == ["first", "second"]


def test_reset_restores_the_initial_state(runtime: RuntimeServer) -> None:
    runtime.script = lambda prompt, body: "x"
    runtime.models.clear()
    runtime.tokenizer = False
    requests.get(f"{runtime.url}/api/tags", timeout=5)

    runtime.reset()

    assert runtime.requests == [] and runtime.script is None
    assert runtime.models == {MODEL} and runtime.tokenizer is True


def test_a_client_closing_a_slow_stream_early_is_counted(runtime: RuntimeServer) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    runtime.script = lambda prompt, body: Reply(text=words, chunk_delay=0.02)

    with requests.post(
        f"{runtime.url}/v1/completions",
        json={"model": MODEL, "prompt": "p", "stream": True},
        stream=True,
        timeout=5,
    ) as response:
        first = next(response.iter_lines())
        assert first.startswith(b"data: ")

    assert wait_until(lambda: runtime.closed_early == 1)


def test_a_complete_stream_is_not_counted_as_closed_early(runtime: RuntimeServer) -> None:
    runtime.script = lambda prompt, body: Reply(text="a b c", chunk_delay=0.01)

    response = requests.post(
        f"{runtime.url}/api/generate", json={"model": MODEL, "prompt": "p"}, timeout=5
    )

    assert len(response.text.splitlines()) == 4
    assert runtime.closed_early == 0


def test_a_hanging_reply_times_out_the_client_and_does_not_delay_stop() -> None:
    runtime = RuntimeServer().start()
    runtime.script = lambda prompt, body: Reply(delay=30)
    with pytest.raises(requests.ReadTimeout):
        requests.post(
            f"{runtime.url}/api/generate",
            json={"model": MODEL, "prompt": "x", "stream": False},
            timeout=(2, 0.2),
        )

    # A second client that stays connected while its reply hangs.
    sock = socket.create_connection((runtime.host, runtime.port), timeout=5)
    body = json.dumps({"model": MODEL, "prompt": "y", "stream": False}).encode()
    sock.sendall(
        b"POST /api/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    assert wait_until(lambda: len(runtime.requests) == 2)

    started = time.monotonic()
    runtime.stop()

    assert time.monotonic() - started < 1.0
    assert sock.recv(1024) == b""  # cut without an answer
    sock.close()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{runtime.url}/", timeout=1)


def test_it_keeps_connections_alive_and_restarts_on_the_same_port(
    runtime: RuntimeServer,
) -> None:
    connection = http.client.HTTPConnection(runtime.host, runtime.port, timeout=5)
    payload = json.dumps({"model": MODEL, "prompt": "x", "stream": False})
    for _ in range(200):
        connection.request("POST", "/api/generate", payload, {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200 and response.getheader("Connection") is None
        response.read()
    connection.close()
    assert len(runtime.generate_requests()) == 200

    url = runtime.url
    runtime.stop()
    runtime.start()
    assert runtime.url == url
    assert requests.get(f"{url}/api/version", timeout=5).status_code == 200


def test_split_chunks_joins_back_to_the_text() -> None:
    for text in ["", "  lead", "a b  c ", "single"]:
        assert "".join(split_chunks(text)) == text
        assert "".join(split_chunks(text, 4)) == text
        assert len(split_chunks(text, 4)) == 4
    assert split_chunks("a b  c ") == ["a", " b", "  c "]
