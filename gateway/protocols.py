"""The wire formats of the runtime protocols: request bodies, option names, answers.

Pure functions with no I/O; ``gateway.runtime`` sends what they build and reads what they
parse. Kinds of endpoint: ``ollama`` (``/api/generate``), ``openai`` (``/v1/completions``)
and ``openai-chat`` (``/v1/chat/completions``).
"""

import json
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
    body = {
        "model": name,
        "stream": stream,
        **openai_options(options, default_max_tokens=default_max_tokens),
    }
    if endpoint.api == "openai-chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        return f"{endpoint.base_url}/v1/chat/completions", body
    body["prompt"] = prompt
    return f"{endpoint.base_url}/v1/completions", body


def error_message(text: str) -> str:
    """The runtime's error message in an error answer's body (either protocol's shape)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)[:500]
    if error:
        return str(error)[:500]
    return str(data)[:500]


def is_unknown_model(status: int, message: str) -> bool:
    text = message.lower()
    return (
        status in (400, 404)
        and "model" in text
        and ("not found" in text or "does not exist" in text or "no such" in text)
    )


def parse_complete(endpoint: Endpoint, data: Any) -> tuple[str, int | None, int | None]:
    if not isinstance(data, dict):
        raise ValueError("not an object")
    if endpoint.api == "ollama":
        return str(data["response"]), data.get("prompt_eval_count"), data.get("eval_count")
    choice = data["choices"][0]
    text = choice["message"]["content"] if endpoint.api == "openai-chat" else choice["text"]
    usage = data.get("usage") or {}
    return str(text or ""), usage.get("prompt_tokens"), usage.get("completion_tokens")


def parse_chunk(endpoint: Endpoint, line: bytes) -> tuple[str, dict | None, bool]:
    """(text piece, usage-bearing object or None, done) of one streamed line."""
    if endpoint.api == "ollama":
        data = json.loads(line)
        if data.get("error"):
            raise ValueError(str(data["error"]))
        return data.get("response", ""), data if data.get("done") else None, bool(data.get("done"))
    if not line.startswith(b"data:"):
        return "", None, False
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return "", None, True
    data = json.loads(payload)
    choices = data.get("choices") or [{}]
    choice = choices[0]
    if endpoint.api == "openai-chat":
        piece = (choice.get("delta") or {}).get("content") or ""
    else:
        piece = choice.get("text") or ""
    return piece, data if data.get("usage") else None, False


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
