"""A small, real HTTP server on loopback that speaks a model runtime's protocols.

The test suite and the benchmarks talk to it over real sockets instead of patching
``requests``. One port serves, at the same time:

* Ollama's API: ``POST /api/generate`` and ``POST /api/chat`` (streaming by default, as
  NDJSON), ``GET /api/tags``, ``GET /api/version``, ``GET /``, ``POST /api/tokenize`` and
  ``POST /api/embed``;
* the OpenAI-compatible API as llama.cpp, llama-cpp-python and vLLM serve it:
  ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming as server-sent events
  when asked), ``GET /v1/models``, ``POST /tokenize`` (llama.cpp) and
  ``POST /extras/tokenize`` / ``POST /extras/tokenize/count`` (llama-cpp-python) and
  ``POST /v1/embeddings``.

Embeddings are a hashed bag of words (:func:`word_vector`): texts that share words are
close, others are not. :attr:`RuntimeServer.embed_error` makes the embedding endpoints
answer an error instead.

What a generate call answers is decided by :attr:`RuntimeServer.script`, which may return a
:class:`Reply` to simulate errors (e.g. a busy runtime's 503), hanging runtimes (``delay``)
and slow generation (``chunk_delay``). With :attr:`RuntimeServer.context_length` set, a
prompt that does not fit is refused as llama.cpp, llama-cpp-python, vLLM or Ollama word it.
Every request is recorded in :attr:`RuntimeServer.requests`.

Example::

    with RuntimeServer() as runtime:
        runtime.script = lambda prompt, body: Reply(text="hi", status=503, error="busy")
        ...  # point the code under test at runtime.url

Standard library only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import select
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Recorded", "Reply", "RuntimeServer", "split_chunks", "token_ids", "word_vector"]

#: Paths of the calls that generate text (what ``generate_requests()`` returns).
GENERATE_PATHS = frozenset(
    {"/api/generate", "/api/chat", "/v1/completions", "/v1/chat/completions"}
)
CHAT_PATHS = frozenset({"/api/chat", "/v1/chat/completions"})

_OK, _STOPPED, _DISCONNECTED = "ok", "stopped", "disconnected"
_POLL_SLICE = 0.02  # seconds; how often a waiting reply checks for stop() and client hang-ups


class _Headers(dict[str, str]):
    """A plain ``dict`` of request headers, as sent, whose look-ups ignore case."""

    def __missing__(self, key: str) -> str:
        if isinstance(key, str):
            lowered = key.lower()
            for name, value in self.items():
                if name.lower() == lowered:
                    return value
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if not isinstance(key, str):
            return False
        lowered = key.lower()
        return any(name.lower() == lowered for name in self)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str  # as sent, including any query string
    headers: dict[str, str]  # as sent; look-ups ignore case
    body: dict | None  # parsed JSON body (None if empty / not a JSON object)


@dataclass
class Reply:
    """What the server answers to one generate call."""

    text: str = "ok"
    status: int = 200  # != 200: answer an error instead
    error: str | None = None  # error message for error replies
    delay: float = 0.0  # seconds to wait before answering (before the first chunk when streaming)
    chunk_delay: float = 0.0  # seconds between streamed chunks
    # When streaming, split text into this many chunks (default: one per word, keeping spaces).
    chunks: int | None = None
    prompt_tokens: int | None = None  # default: len(prompt.split())
    completion_tokens: int | None = None  # default: len(text.split())
    finish_reason: str = "stop"  # Ollama's done_reason / OpenAI's finish_reason
    # Close the connection without a word, as a server closing a kept-alive connection just
    # as the request arrives.
    hang_up: bool = False


Script = Callable[[str, dict], "Reply | str"]


def split_chunks(text: str, chunks: int | None = None) -> list[str]:
    """Split ``text`` into the pieces a stream sends; they always join back to ``text``.

    Without ``chunks``: one piece per whitespace-separated word, each word carrying the
    whitespace before it (``"a b"`` -> ``["a", " b"]``). With ``chunks``: that many pieces of
    near-equal length (some empty if the text is shorter than ``chunks``).
    """
    if chunks is None:
        pieces = re.findall(r"\s*\S+", text)
        rest = text[sum(map(len, pieces)) :]
        if rest:
            if pieces:
                pieces[-1] += rest
            else:
                pieces = [rest]
        return pieces
    count = max(1, chunks)
    size, extra = divmod(len(text), count)
    pieces, pos = [], 0
    for index in range(count):
        end = pos + size + (1 if index < extra else 0)
        pieces.append(text[pos:end])
        pos = end
    return pieces


def token_ids(text: str) -> list[int]:
    """One stable fake token id per whitespace-separated word."""
    return [zlib.crc32(word.encode()) % 32000 + 1 for word in text.split()]


EMBEDDING_DIMENSION = 32


def word_vector(text: str) -> list[float]:
    """A stable fake embedding: each lowercased word adds 1 at a hashed position."""
    vector = [0.0] * EMBEDDING_DIMENSION
    for word in re.findall(r"\w+", text.lower()):
        vector[zlib.crc32(word.encode()) % EMBEDDING_DIMENSION] += 1.0
    return vector


def prompt_of(path: str, body: dict | None) -> str:
    """The prompt of a generate call: the ``prompt`` field, or for chat calls the content
    of the last user message. Raises ``ValueError`` when the body has no usable one."""
    if body is None:
        raise ValueError("request body is not a JSON object")
    if path in CHAT_PATHS:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ValueError("'messages' must be a list")
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _content_text(message.get("content"))
        return ""
    prompt = body.get("prompt", "")
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):  # OpenAI batch prompts or token ids: joined with newlines
        return "\n".join(str(item) for item in prompt)
    raise ValueError("'prompt' must be a string")


def _content_text(content: Any) -> str:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return str(content)


def _is_openai_path(path: str) -> bool:
    return path.startswith(("/v1/", "/extras/")) or path in ("/tokenize", "/detokenize")


def _now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class _ClientGone(Exception):
    """The request cannot be answered: the client left or the server is stopping."""


# path -> (allowed methods, handler method name, needs the tokenizer)
_ROUTES: dict[str, tuple[frozenset[str], str, bool]] = {
    "/": (frozenset({"GET"}), "_root", False),
    "/api/generate": (frozenset({"POST"}), "_ollama_generate", False),
    "/api/chat": (frozenset({"POST"}), "_ollama_chat", False),
    "/api/tags": (frozenset({"GET"}), "_ollama_tags", False),
    "/api/version": (frozenset({"GET"}), "_ollama_version", False),
    "/api/tokenize": (frozenset({"POST"}), "_ollama_tokenize", True),
    "/v1/completions": (frozenset({"POST"}), "_openai_completions", False),
    "/v1/chat/completions": (frozenset({"POST"}), "_openai_chat", False),
    "/v1/models": (frozenset({"GET"}), "_openai_models", False),
    "/tokenize": (frozenset({"POST"}), "_llamacpp_tokenize", True),
    "/extras/tokenize": (frozenset({"POST"}), "_extras_tokenize", True),
    "/extras/tokenize/count": (frozenset({"POST"}), "_extras_tokenize_count", True),
    "/api/embed": (frozenset({"POST"}), "_ollama_embed", False),
    "/v1/embeddings": (frozenset({"POST"}), "_openai_embeddings", False),
}


class _HTTPServer(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    runtime: RuntimeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that hang up and about anything while stopping."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) or self.runtime._stop_event.is_set():
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "runtime-test-server/1.0"
    sys_version = ""
    disable_nagle_algorithm = True  # TCP_NODELAY on every accepted connection
    server: _HTTPServer

    # -- connection life cycle -------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.runtime = self.server.runtime
        self.runtime._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except (OSError, ValueError):
            pass
        finally:
            self.runtime._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """No per-request logging: it would dominate the cost of a small request."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    # -- request handling ------------------------------------------------------------------

    def _dispatch(self) -> None:
        self._started = time.monotonic()
        self._responded = False
        try:
            raw = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._error(400, str(exc), openai=_is_openai_path(self.path))
            return
        path = self.path.split("?", 1)[0]
        body: dict | None = None
        malformed = False
        if raw.strip():
            try:
                parsed = json.loads(raw)
            except ValueError:
                malformed = True
            else:
                if isinstance(parsed, dict):
                    body = parsed
                else:
                    malformed = True
        self.runtime._record(
            Recorded(self.command, self.path, _Headers(self.headers.items()), body)
        )
        openai = _is_openai_path(path)
        try:
            self._route(path, body, malformed, openai)
        except _ClientGone:
            self.close_connection = True
        except OSError:
            self.close_connection = True
            raise
        except Exception as exc:  # a bug or a failing script: answer 500 rather than hang up
            if self._responded:
                self.close_connection = True
                raise
            self._error(500, f"{type(exc).__name__}: {exc}", openai=openai)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size_line = self.rfile.readline(65537)
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ValueError("invalid chunked request body") from None
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(3)
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        try:
            size = int(length)
        except ValueError:
            raise ValueError("invalid Content-Length") from None
        if size < 0:
            raise ValueError("invalid Content-Length")
        return self.rfile.read(size) if size else b""

    def _route(self, path: str, body: dict | None, malformed: bool, openai: bool) -> None:
        route = _ROUTES.get(path)
        if route is None or (route[2] and not self.runtime.tokenizer):
            self._error(404, "404 page not found", openai=openai, kind="not_found_error")
            return
        methods, handler_name, _ = route
        method = "GET" if self.command == "HEAD" else self.command
        if method not in methods:
            self._error(405, "405 method not allowed", openai=openai)
            return
        if method == "POST" and body is None:
            message = "invalid JSON body" if malformed else "missing request body"
            self._error(400, message, openai=openai)
            return
        getattr(self, handler_name)(body)

    # -- responses -------------------------------------------------------------------------

    def _head(self, status: int, content_type: str, length: int | None) -> bytes:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error" if status >= 400 else "OK"
        lines = [
            f"{self.protocol_version} {status} {phrase}",
            f"Server: {self.server_version}",
            f"Date: {self.date_time_string()}",
            f"Content-Type: {content_type}",
            *(f"{name}: {value}" for name, value in self.runtime.response_headers.items()),
        ]
        if length is None:
            if self.request_version == "HTTP/1.0":
                self.close_connection = True  # no chunked encoding in HTTP/1.0
            else:
                lines.append("Transfer-Encoding: chunked")
        else:
            lines.append(f"Content-Length: {length}")
        if self.close_connection:
            lines.append("Connection: close")
        elif self.request_version == "HTTP/1.0":
            lines.append("Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        """Answer in one write (headers and body together)."""
        head = self._head(status, content_type, len(body))
        self._responded = True
        self.wfile.write(head if self.command == "HEAD" else head + body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, _dumps(obj), "application/json; charset=utf-8")

    def _error(self, status: int, message: str, *, openai: bool, kind: str | None = None) -> None:
        if openai:
            if kind is None:
                kind = "invalid_request_error" if status < 500 else "server_error"
            self._json(status, {"error": {"message": message, "type": kind}})
        else:
            self._json(status, {"error": message})

    def _pause(self, seconds: float) -> str:
        """Wait ``seconds``, returning early if the server stops or the client hangs up."""
        stop = self.runtime._stop_event
        deadline = time.monotonic() + seconds
        poller = select.poll()
        poller.register(self.connection, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            if stop.is_set():
                return _STOPPED
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _OK
            step = min(remaining, _POLL_SLICE)
            if poller.poll(step * 1000):
                if stop.is_set():
                    return _STOPPED
                try:
                    peeked = self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                except OSError:
                    return _DISCONNECTED
                if not peeked:
                    return _DISCONNECTED
                stop.wait(step)  # pipelined data waiting: nothing to learn from polling

    def _stream(self, content_type: str, groups: Iterable[bytes], reply: Reply) -> None:
        """Send ``groups`` as a streamed body, pausing ``reply.chunk_delay`` between them.

        ``groups`` may be a generator: each group is built just before it is sent.

        A client that hangs up before the end is counted in ``closed_early``.
        """
        chunked = self.request_version != "HTTP/1.0"
        head = self._head(200, content_type, None)
        self._responded = True
        for index, group in enumerate(groups):
            if index and reply.chunk_delay > 0:
                outcome = self._pause(reply.chunk_delay)
                if outcome != _OK:
                    self._stream_cut(outcome)
            data = b"%x\r\n%s\r\n" % (len(group), group) if chunked else group
            self._stream_write(head + data if index == 0 else data)
        if chunked:
            self._stream_write(b"0\r\n\r\n")

    def _stream_write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError:
            self._stream_cut(_DISCONNECTED)

    def _stream_cut(self, outcome: str) -> None:
        if outcome == _DISCONNECTED and not self.runtime._stop_event.is_set():
            self.runtime._count_closed_early()
        raise _ClientGone

    # -- generation ------------------------------------------------------------------------

    def _prepare(self, path: str, body: dict, *, openai: bool, stream_default: bool) -> Any:
        """Validate a generate call, run the script and wait out ``delay``.

        Returns ``(model, prompt, reply, stream, prompt_tokens, completion_tokens)``, or None
        when an error reply was already sent.
        """
        model = body.get("model")
        if not isinstance(model, str) or not model:
            self._error(400, "model is required", openai=openai)
            return None
        if not self.runtime._knows(model, ollama=not openai):
            self._model_not_found(model, openai=openai)
            return None
        try:
            prompt = prompt_of(path, body)
        except ValueError as exc:
            self._error(400, str(exc), openai=openai)
            return None
        if self._over_context(prompt, body, openai=openai):
            return None
        stream = bool(body.get("stream", stream_default))
        reply = self.runtime._reply_for(prompt, body)
        if reply.hang_up:
            self.close_connection = True
            return None
        if reply.delay > 0:
            outcome = self._pause(reply.delay)
            if outcome != _OK:
                self._stream_cut(outcome)
        if reply.status != 200:
            self._error(reply.status, reply.error or "error", openai=openai, kind="server_error")
            return None
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else len(prompt.split())
        )
        completion_tokens = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else len(reply.text.split())
        )
        return model, prompt, reply, stream, prompt_tokens, completion_tokens

    def _over_context(self, prompt: str, body: dict, *, openai: bool) -> bool:
        """With :attr:`RuntimeServer.context_length` set, answers a prompt (plus the answer's
        room) that does not fit the way the runtime of :attr:`context_style` does."""
        limit = self.runtime.context_length
        if limit is None:
            return False
        prompt_tokens = len(prompt.split())
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        room = body.get("max_tokens", options.get("num_predict", 0))
        room = room if isinstance(room, int) and room > 0 else 0
        total = prompt_tokens + room
        if total <= limit:
            return False
        style = self.runtime.context_style if openai else "ollama"
        if style == "ollama":
            self._json(400, {"error": "the input length exceeds the context length"})
        elif style == "llama.cpp":
            message = (
                f"request ({total} tokens) exceeds the available context size ({limit} tokens),"
                " try increasing it"
            )
            error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
            self._json(400, {"error": {**error, "n_prompt_tokens": total, "n_ctx": limit}})
        elif style == "llama-cpp-python":
            message = (
                f"This model's maximum context length is {limit} tokens, however you requested "
                f"{total} tokens ({prompt_tokens} in your prompt; {room} for the completion). "
                "Please reduce your prompt; or completion length."
            )
            error = {"message": message, "type": "invalid_request_error"}
            self._json(400, {"error": {**error, "code": "context_length_exceeded"}})
        else:  # vllm
            message = (
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {total} tokens ({prompt_tokens} in the messages, {room} in the "
                "completion). Please reduce the length of the messages or completion."
            )
            self._json(
                400,
                {"object": "error", "message": message, "type": "BadRequestError", "code": 400},
            )
        return True

    def _model_not_found(self, model: str, *, openai: bool) -> None:
        if openai:
            error = {
                "message": f"The model `{model}` does not exist",
                "type": "invalid_request_error",
                "code": "model_not_found",
            }
            self._json(404, {"error": error})
        else:
            self._json(404, {"error": f"model '{model}' not found, try pulling it first"})

    def _ollama_chat(self, body: dict) -> None:
        self._ollama_generate(body, chat=True)

    def _ollama_generate(self, body: dict, *, chat: bool = False) -> None:
        path = "/api/chat" if chat else "/api/generate"
        prepared = self._prepare(path, body, openai=False, stream_default=True)
        if prepared is None:
            return
        model, _, reply, stream, prompt_tokens, completion_tokens = prepared

        def text(piece: str) -> dict[str, Any]:
            if chat:
                return {"message": {"role": "assistant", "content": piece}}
            return {"response": piece}

        def stats() -> dict[str, Any]:
            total = max(1, int((time.monotonic() - self._started) * 1e9))
            # /api/generate hands back a context to continue from; /api/chat has none.
            counts = {
                "prompt_eval_count": prompt_tokens,
                "prompt_eval_duration": max(1, total // 4),
                "eval_count": completion_tokens,
                "eval_duration": max(1, total // 2),
            }
            return {
                "done_reason": reply.finish_reason,
                **({} if chat else {"context": [1, 2, 3]}),
                "total_duration": total,
                "load_duration": 1000,
                **(counts if self.runtime.reports_usage else {}),
            }

        if not stream:
            self._json(
                200,
                {
                    "model": model,
                    "created_at": _now_iso(),
                    **text(reply.text),
                    "done": True,
                    **stats(),
                },
            )
            return

        def lines() -> Iterable[bytes]:
            for piece in split_chunks(reply.text, reply.chunks):
                obj = {"model": model, "created_at": _now_iso(), **text(piece), "done": False}
                yield _dumps(obj) + b"\n"
            final = {"model": model, "created_at": _now_iso(), **text(""), "done": True}
            yield _dumps({**final, **stats()}) + b"\n"

        self._stream("application/x-ndjson", lines(), reply)

    def _openai_completions(self, body: dict) -> None:
        self._openai_generate("/v1/completions", body, chat=False)

    def _openai_chat(self, body: dict) -> None:
        self._openai_generate("/v1/chat/completions", body, chat=True)

    def _openai_generate(self, path: str, body: dict, *, chat: bool) -> None:
        prepared = self._prepare(path, body, openai=True, stream_default=False)
        if prepared is None:
            return
        model, _, reply, stream, prompt_tokens, completion_tokens = prepared
        number = self.runtime._next_id()
        ident = f"chatcmpl-{number}" if chat else f"cmpl-{number}"
        created = int(time.time())
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if not stream:
            if chat:
                choice: dict[str, Any] = {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text},
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            else:
                choice = {
                    "index": 0,
                    "text": reply.text,
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            self._json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion" if chat else "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [choice],
                    **({"usage": usage} if self.runtime.reports_usage else {}),
                },
            )
            return

        obj_type = "chat.completion.chunk" if chat else "text_completion"

        def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            obj = {"id": ident, "object": obj_type, "created": created, "model": model}
            return b"data: " + _dumps({**obj, "choices": choices, **extra}) + b"\n\n"

        groups = []
        for index, piece in enumerate(split_chunks(reply.text, reply.chunks)):
            if chat:
                delta = (
                    {"role": "assistant", "content": piece} if index == 0 else {"content": piece}
                )
                choice = {"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}
            else:
                choice = {"index": 0, "text": piece, "finish_reason": None, "logprobs": None}
            groups.append(event([choice]))
        if chat:
            last = {"index": 0, "delta": {}, "finish_reason": reply.finish_reason, "logprobs": None}
        else:
            last = {"index": 0, "text": "", "finish_reason": reply.finish_reason, "logprobs": None}
        tail = event([last])
        options = body.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage")
        if asked and self.runtime.reports_usage:
            tail += event([], usage=usage)
        groups.append(tail + b"data: [DONE]\n\n")
        self._stream("text/event-stream; charset=utf-8", groups, reply)

    # -- the other endpoints ---------------------------------------------------------------

    def _root(self, body: dict | None) -> None:
        self._send(200, b"Ollama is running", "text/plain; charset=utf-8")

    def _models_pause(self) -> None:
        """A runtime busy generating answers its model list late (llama-cpp-python holds
        one lock for both): :attr:`RuntimeServer.models_delay`."""
        if self.runtime.models_delay > 0 and self._pause(self.runtime.models_delay) != _OK:
            raise _ClientGone

    def _ollama_tags(self, body: dict | None) -> None:
        self._models_pause()
        models = [
            {"name": m, "model": m, "size": 1, "details": {}} for m in sorted(self.runtime.models)
        ]
        self._json(200, {"models": models})

    def _ollama_version(self, body: dict | None) -> None:
        self._json(200, {"version": "0.0.0-test"})

    def _openai_models(self, body: dict | None) -> None:
        self._models_pause()
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "test"}
            for m in sorted(self.runtime.models)
        ]
        self._json(200, {"object": "list", "data": data})

    def _tokenize_text(self, body: dict, field: str, *, openai: bool) -> str | None:
        """The text to tokenize, or None after answering an error."""
        model = body.get("model")
        if isinstance(model, str) and model and not self.runtime._knows(model, ollama=not openai):
            self._model_not_found(model, openai=openai)
            return None
        text = body.get(field)
        if not isinstance(text, str):
            self._error(400, f"'{field}' must be a string", openai=openai)
            return None
        return text

    def _ollama_tokenize(self, body: dict) -> None:
        text = self._tokenize_text(body, "content", openai=False)
        if text is not None:
            self._json(200, {"model": body.get("model"), "tokens": token_ids(text)})

    def _llamacpp_tokenize(self, body: dict) -> None:
        text = self._tokenize_text(body, "content", openai=True)
        if text is not None:
            self._json(200, {"tokens": token_ids(text)})

    def _extras_tokenize(self, body: dict) -> None:
        text = self._tokenize_text(body, "input", openai=True)
        if text is not None:
            self._json(200, {"tokens": token_ids(text)})

    def _extras_tokenize_count(self, body: dict) -> None:
        text = self._tokenize_text(body, "input", openai=True)
        if text is not None:
            self._json(200, {"count": len(text.split())})

    def _embed_inputs(self, body: dict, *, openai: bool) -> list[str] | None:
        """The texts to embed, or None after answering an error."""
        error = self.runtime.embed_error
        if error is not None:
            self._error(error.status, error.error or "embedding failed", openai=openai)
            return None
        model = body.get("model")
        if not isinstance(model, str) or not self.runtime._knows(model, ollama=not openai):
            self._model_not_found(str(model), openai=openai)
            return None
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            self._error(400, "'input' must be a string or a list of strings", openai=openai)
            return None
        return texts

    def _ollama_embed(self, body: dict) -> None:
        texts = self._embed_inputs(body, openai=False)
        if texts is not None:
            vectors = [word_vector(text) for text in texts]
            self._json(200, {"model": body["model"], "embeddings": vectors})

    def _openai_embeddings(self, body: dict) -> None:
        texts = self._embed_inputs(body, openai=True)
        if texts is not None:
            data = [
                {"object": "embedding", "index": index, "embedding": word_vector(text)}
                for index, text in enumerate(texts)
            ]
            tokens = sum(len(text.split()) for text in texts)
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            self._json(
                200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
            )


class RuntimeServer:
    """A fake model runtime on a real loopback socket (see the module docstring).

    Attributes meant for tests: :attr:`url`, :attr:`requests`, :attr:`models`,
    :attr:`script`, :attr:`tokenizer`, :attr:`response_headers` and :attr:`closed_early`.
    ``stop()`` followed by ``start()`` serves again on the same port, which simulates a
    runtime restart.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, models: tuple[str, ...] = ("test-model",)
    ) -> None:
        self.host = host
        self._port = port
        self._initial_models = tuple(models)
        self.models: set[str] = set(models)
        self.script: Script | None = None
        self.tokenizer: bool = True
        #: False: no token counts in any answer, streamed or not, as llama-cpp-python's
        #: streams (it ignores ``stream_options``) and some OpenAI-compatible servers.
        self.reports_usage: bool = True
        #: A context size in tokens (words here): longer prompts, with the answer's room,
        #: are refused as :attr:`context_style` words it on the OpenAI-compatible paths
        #: (``llama.cpp``, ``llama-cpp-python`` or ``vllm``); Ollama's wording on its own.
        self.context_length: int | None = None
        #: Seconds before the model list (/api/tags, /v1/models) is answered.
        self.models_delay: float = 0.0
        self.context_style: str = "llama.cpp"
        #: When set, the embedding endpoints answer this error (its status and message).
        self.embed_error: Reply | None = None
        #: Extra headers of every answer (e.g. ``Set-Cookie``).
        self.response_headers: dict[str, str] = {}
        self.requests: list[Recorded] = []
        #: Generate calls whose client hung up before the end (during the ``delay``, or
        #: between the chunks of a stream; not when ``stop()`` cut them).
        self.closed_early: int = 0
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}

    # -- life cycle ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("RuntimeServer has no port before start()")
        return self._port

    @property
    def url(self) -> str:
        """``http://HOST:PORT``, without a trailing slash."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> RuntimeServer:
        if self._httpd is not None:
            raise RuntimeError("RuntimeServer is already running")
        self._stop_event.clear()
        server_class = _HTTPServer
        if ":" in self.host:
            server_class = type("_HTTPServer6", (_HTTPServer,), {"address_family": socket.AF_INET6})
        httpd = server_class((self.host, self._port), _Handler)
        httpd.runtime = self
        self._port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"RuntimeServer:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections (and any slow reply) and join the threads."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stop_event.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        for _, handler_thread in connections:
            if handler_thread is not threading.current_thread():
                handler_thread.join(timeout=1)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> RuntimeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget recorded requests and restore the script, models, tokenizer and
        ``closed_early`` to their initial state."""
        with self._lock:
            self.requests.clear()
            self.closed_early = 0
        self.script = None
        self.models = set(self._initial_models)
        self.tokenizer = True
        self.reports_usage = True
        self.context_length = None
        self.context_style = "llama.cpp"
        self.models_delay = 0.0
        self.embed_error = None
        self.response_headers = {}

    # -- inspection ------------------------------------------------------------------------

    def generate_requests(self) -> list[Recorded]:
        """The generate / completion calls received, in order."""
        with self._lock:
            recorded = list(self.requests)
        return [r for r in recorded if r.path.split("?", 1)[0] in GENERATE_PATHS]

    def prompts(self) -> list[str]:
        """The prompt of each generate call ("" when its body had none)."""
        prompts = []
        for recorded in self.generate_requests():
            try:
                prompts.append(prompt_of(recorded.path.split("?", 1)[0], recorded.body))
            except ValueError:
                prompts.append("")
        return prompts

    # -- used by the handler ---------------------------------------------------------------

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def _count_closed_early(self) -> None:
        with self._lock:
            self.closed_early += 1

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections[sock] = threading.current_thread()
            stopping = self._stop_event.is_set()
        if stopping:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.pop(sock, None)

    def _knows(self, model: str, *, ollama: bool) -> bool:
        models = self.models
        if model in models:
            return True
        if ollama:  # Ollama treats "name" and "name:latest" as the same model
            if model.endswith(":latest") and model[: -len(":latest")] in models:
                return True
            if ":" not in model and f"{model}:latest" in models:
                return True
        return False

    def _reply_for(self, prompt: str, body: dict) -> Reply:
        script = self.script
        if script is None:
            return Reply(text=f"echo: {prompt}")
        reply = script(prompt, body)
        if isinstance(reply, str):
            return Reply(text=reply)
        if not isinstance(reply, Reply):
            raise TypeError(f"script returned {type(reply).__name__}, expected Reply or str")
        return reply
