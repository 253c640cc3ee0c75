"""The wire formats of the runtime protocols: request bodies, option names, answers.

Pure functions with no I/O; the client (``gateway.runtime``) sends what they build and
reads what they parse. Kinds of endpoint: ``ollama`` (``/api/generate``), ``openai``
(``/v1/completions``) and ``openai-chat`` (``/v1/chat/completions``). A call that carries
chat messages instead of one prompt goes to the endpoint's chat path: Ollama's
``/api/chat`` or the OpenAI-compatible ``/v1/chat/completions``. The answers are read by
their shape, so one parser serves both paths of a protocol.
"""

import json
from dataclasses import dataclass
from typing import Any

from gateway.routing import Endpoint

# Ollama option names that mean the same thing in the OpenAI-compatible API.
OPENAI_OPTION_NAMES = {"num_predict": "max_tokens"}
# Ollama options about loading the model that a per-request OpenAI call cannot set.
OLLAMA_ONLY_OPTIONS = frozenset(
    {
        "num_ctx",
        "num_gpu",
        "num_thread",
        "num_batch",
        "main_gpu",
        "low_vram",
        "use_mmap",
        "use_mlock",
        "numa",
        "num_keep",
        "vocab_only",
        "f16_kv",
        "logits_all",
    }
)


def openai_options(options: dict[str, Any], *, default_max_tokens: int) -> dict[str, Any]:
    """Maps Ollama option names to OpenAI's; passes the rest on unchanged."""
    mapped: dict[str, Any] = {}
    for name, value in options.items():
        if name in OLLAMA_ONLY_OPTIONS:
            continue
        mapped[OPENAI_OPTION_NAMES.get(name, name)] = value
    mapped.setdefault("max_tokens", default_max_tokens)
    return mapped


def _openai_body(
    name: str, options: dict, *, stream: bool, default_max_tokens: int
) -> dict[str, Any]:
    body = {
        "model": name,
        "stream": stream,
        **openai_options(options, default_max_tokens=default_max_tokens),
    }
    if stream:
        # Token counts of a streamed answer come only when asked for: a last chunk with
        # "usage" and no choices (vLLM, llama.cpp, llama-cpp-python as OpenAI does).
        body["stream_options"] = {"include_usage": True}
    return body


def generate_request(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    options: dict,
    *,
    stream: bool,
    default_max_tokens: int,
) -> tuple[str, dict[str, Any]]:
    """The (url, body) of one generate call in the endpoint's protocol."""
    name = endpoint.model_name(model)
    if endpoint.api == "ollama":
        body: dict[str, Any] = {"model": name, "prompt": prompt, "stream": stream}
        if options:
            body["options"] = options
        return f"{endpoint.base_url}/api/generate", body
    body = _openai_body(name, options, stream=stream, default_max_tokens=default_max_tokens)
    if endpoint.api == "openai-chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        return f"{endpoint.base_url}/v1/chat/completions", body
    body["prompt"] = prompt
    return f"{endpoint.base_url}/v1/completions", body


def chat_request(
    endpoint: Endpoint,
    model: str,
    messages: list[dict[str, str]],
    options: dict,
    *,
    stream: bool,
    default_max_tokens: int,
) -> tuple[str, dict[str, Any]]:
    """The (url, body) of one call with chat ``messages`` (``role``, ``content``): the whole
    context of the call, as the agent built it; the runtime keeps nothing between calls."""
    name = endpoint.model_name(model)
    if endpoint.api == "ollama":
        body: dict[str, Any] = {"model": name, "messages": messages, "stream": stream}
        if options:
            body["options"] = options
        return f"{endpoint.base_url}/api/chat", body
    body = _openai_body(name, options, stream=stream, default_max_tokens=default_max_tokens)
    body["messages"] = messages
    return f"{endpoint.base_url}/v1/chat/completions", body


def parse_complete(endpoint: Endpoint, data: Any) -> tuple[str, int | None, int | None]:
    if not isinstance(data, dict):
        raise ValueError("not an object")
    if endpoint.api == "ollama":
        text = data["message"]["content"] if "message" in data else data["response"]
        return str(text), data.get("prompt_eval_count"), data.get("eval_count")
    choice = data["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    usage = data.get("usage") or {}
    return str(text or ""), usage.get("prompt_tokens"), usage.get("completion_tokens")


TOKENIZE_PATHS: dict[str, tuple[str, ...]] = {
    "ollama": ("/api/tokenize",),
    "openai": ("/extras/tokenize/count", "/tokenize"),
    "openai-chat": ("/extras/tokenize/count", "/tokenize"),
}


def tokenize_body(path: str, model: str, text: str) -> dict[str, Any]:
    if path == "/extras/tokenize/count":
        return {"model": model, "input": text}
    if path == "/tokenize":
        return {"content": text}
    return {"model": model, "content": text}


def token_count(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("count"), int):
        return data["count"]
    tokens = data.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def stream_usage(endpoint: Endpoint, final: dict | None) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) from a stream's usage-bearing chunk, if any."""
    if not final:
        return None, None
    if endpoint.api == "ollama":
        return final.get("prompt_eval_count"), final.get("eval_count")
    usage = final.get("usage") or {}
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


def models_path(endpoint: Endpoint) -> str:
    return "/api/tags" if endpoint.api == "ollama" else "/v1/models"


def parse_models(endpoint: Endpoint, data: dict[str, Any]) -> list[str]:
    if endpoint.api == "ollama":
        return [m.get("name") or m.get("model") for m in data.get("models", [])]
    return [m["id"] for m in data.get("data", [])]


# --- Embeddings ---------------------------------------------------------------------------


def embed_request(endpoint: Endpoint, model: str, texts: list[str]) -> tuple[str, dict[str, Any]]:
    """The path and body of an embedding call: Ollama ``POST /api/embed``, else the
    OpenAI-compatible ``POST /v1/embeddings``."""
    path = "/api/embed" if endpoint.api == "ollama" else "/v1/embeddings"
    return path, {"model": endpoint.model_name(model), "input": texts}


def embedding_tokens(endpoint: Endpoint, data: Any) -> int | None:
    """The tokens an embedding answer says it read, if it says."""
    if not isinstance(data, dict):
        return None
    if endpoint.api == "ollama":
        count = data.get("prompt_eval_count")
    else:
        count = (data.get("usage") or {}).get("prompt_tokens")
    return count if isinstance(count, int) else None


def parse_embeddings(endpoint: Endpoint, data: Any, count: int) -> list[list[float]]:
    """The vectors of an embedding answer, in input order (ValueError when unreadable)."""
    if endpoint.api == "ollama":
        vectors = data["embeddings"]
    else:
        rows = sorted(data["data"], key=lambda row: row.get("index", 0))
        vectors = [row["embedding"] for row in rows]
    if len(vectors) != count or not all(isinstance(v, list) and v for v in vectors):
        raise ValueError(f"expected {count} embeddings")
    if len({len(v) for v in vectors}) != 1:
        raise ValueError("embeddings of different dimensions")
    return vectors


@dataclass(frozen=True)
class Chunk:
    """One line of a streamed answer: its text piece, the usage-bearing object (or None),
    whether the stream is done, and the reason the model stopped, once it says it."""

    piece: str
    usage: dict | None
    done: bool
    finish_reason: str | None = None


def read_chunk(endpoint: Endpoint, line: bytes) -> Chunk:
    """One streamed line (ValueError etc. when unreadable): an Ollama JSON line, or an
    OpenAI server-sent ``data:`` line (other lines carry nothing)."""
    if endpoint.api == "ollama":
        data = json.loads(line)
        if data.get("error"):
            raise ValueError(str(data["error"]))
        message = data.get("message")
        piece = (message or {}).get("content", "") if "message" in data else data.get("response")
        done = bool(data.get("done"))
        reason = (data.get("done_reason") or "stop") if done else None
        return Chunk(piece or "", data if done else None, done, reason)
    if not line.startswith(b"data:"):
        return Chunk("", None, False)
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return Chunk("", None, True)
    data = json.loads(payload)
    choice = (data.get("choices") or [{}])[0]
    if "delta" in choice:
        piece = (choice.get("delta") or {}).get("content") or ""
    else:
        piece = choice.get("text") or ""
    usage = data if data.get("usage") else None
    return Chunk(piece, usage, False, choice.get("finish_reason"))


def finish_reason(endpoint: Endpoint, data: Any) -> str:
    """Why a whole (non-streamed) answer stopped: ``stop`` or ``length`` (OpenAI's words)."""
    if not isinstance(data, dict):
        return "stop"
    if endpoint.api == "ollama":
        return str(data.get("done_reason") or "stop")
    choices = data.get("choices") or [{}]
    return str(choices[0].get("finish_reason") or "stop")


def response_format_fields(endpoint: Endpoint, response_format: dict | None) -> dict[str, Any]:
    """The top-level body fields that ask the runtime for ``response_format`` (OpenAI's):
    Ollama's ``format`` (``"json"`` or the JSON schema), or the field itself for an
    OpenAI-compatible runtime. ``{"type": "text"}`` asks for nothing."""
    if not response_format or response_format.get("type") == "text":
        return {}
    if endpoint.api != "ollama":
        return {"response_format": response_format}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return {"format": schema if isinstance(schema, dict) else "json"}
    return {"format": "json"}
