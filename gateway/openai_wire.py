"""The wire format of the OpenAI-compatible face (``/v1/``): pure functions, no I/O.

What a client sends is read into the service's own terms (chat messages of ``role`` and
``content``, options under Ollama's names, as ``/api.php`` takes them); what the service
answers is built here in OpenAI's shapes: ``chat.completion``, ``chat.completion.chunk``,
``text_completion``, the embedding and model lists, and the server-sent events of a
stream (``data: {chunk}`` ... ``data: [DONE]``).
"""

import base64
import json
import re
import struct
from collections.abc import Iterable
from typing import Any

DONE = b"data: [DONE]\n\n"

# OpenAI's request fields and the Ollama option each becomes (``/api.php``'s names, which
# the runtime client maps back for an OpenAI-compatible runtime).
OPTION_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "stop": "stop",
}


def options_from(fields: dict[str, Any]) -> dict[str, Any]:
    """The runtime options of a request's validated fields (unset ones left out)."""
    options = {
        option: fields[name]
        for name, option in OPTION_FIELDS.items()
        if fields.get(name) is not None
    }
    if isinstance(options.get("stop"), str):
        options["stop"] = [options["stop"]]
    limit = fields.get("max_completion_tokens")
    if limit is None:
        limit = fields.get("max_tokens")
    if limit is not None:
        options["num_predict"] = limit
    return options


def content_text(content: Any) -> str:
    """A message's text: a string, or the ``text`` parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def runtime_messages(messages: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Chat messages as the runtime takes them: ``role`` and text ``content`` (OpenAI's
    ``developer`` role is a ``system`` message to a runtime)."""
    return [
        {
            "role": "system" if message["role"] == "developer" else message["role"],
            "content": content_text(message.get("content")),
        }
        for message in messages
    ]


def last_user_text(messages: Iterable[dict[str, Any]]) -> str | None:
    """The text of the last ``user`` message, or None when there is none."""
    found = None
    for message in messages:
        if message["role"] == "user":
            found = content_text(message.get("content"))
    return found


def word_pieces(text: str) -> list[str]:
    """``text`` cut into stream pieces, one per word with the space before it; they join
    back to ``text``."""
    pieces = re.findall(r"\s*\S+", text)
    rest = text[sum(map(len, pieces)) :]
    if rest:
        pieces.append(rest)
    return pieces


def usage(prompt_tokens: int | None, completion_tokens: int | None) -> dict[str, int]:
    prompt, completion = prompt_tokens or 0, completion_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def chat_completion(
    *,
    id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A whole ``chat.completion``; ``extra`` adds fields of this service's own."""
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage(prompt_tokens, completion_tokens),
        **(extra or {}),
    }


def chat_chunk(
    *,
    id: str,
    created: int,
    model: str,
    delta: dict[str, str],
    finish_reason: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with one choice."""
    return {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        **(extra or {}),
    }


def usage_chunk(
    *,
    id: str,
    created: int,
    model: str,
    object: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
) -> dict[str, Any]:
    """The last chunk of a stream whose client asked ``stream_options.include_usage``: no
    choices, the usage of the whole answer."""
    return {
        "id": id,
        "object": object,
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def text_completion(
    *,
    id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str | None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    with_usage: bool = True,
) -> dict[str, Any]:
    """A ``text_completion``: the whole answer, or one chunk of a stream (no usage)."""
    answer: dict[str, Any] = {
        "id": id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
    }
    if with_usage:
        answer["usage"] = usage(prompt_tokens, completion_tokens)
    return answer


def embedding_list(
    *, model: str, vectors: list[list[float]], prompt_tokens: int, base64_floats: bool
) -> dict[str, Any]:
    """The answer of ``/v1/embeddings``; with ``base64_floats`` each vector is the base64 of
    its little-endian float32 values (what the ``openai`` SDK asks for by default)."""
    return {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": index,
                "embedding": _base64(vector) if base64_floats else vector,
            }
            for index, vector in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def _base64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def model_list(models: Iterable[tuple[str, str]], *, created: int) -> dict[str, Any]:
    """OpenAI's list of models, from ``(id, owned_by)`` pairs."""
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": owner}
            for name, owner in models
        ],
    }


def event(data: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``data`` as JSON."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def error_body(*, message: str, type: str, code: str, param: str | None) -> dict[str, Any]:
    """OpenAI's error object, which its SDKs parse."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}
