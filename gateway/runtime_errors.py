"""What a runtime's error answer means, read from its status and body. Pure functions.

The runtimes word the same failures differently; these are the wordings known here:

* prompt longer than the context: llama.cpp's server (``exceed_context_size_error``, with
  ``n_prompt_tokens`` and ``n_ctx``), llama-cpp-python and vLLM ("This model's maximum
  context length is 2048 tokens, however you requested 150006 tokens (150000 in your
  prompt; ...)"), llama-cpp-python's own ("Requested tokens (150006) exceed context window
  of 2048") and Ollama ("the input length exceeds the context length");
* unknown model: "model 'x' not found" (Ollama), "The model `x` does not exist" (OpenAI).

A message is reported on one line, without file paths or tracebacks: it comes from another
program and reaches the service's clients.

:func:`raise_for_answer` turns an answer other than 200 into the domain error it means
(``core.errors`` gives their statuses and ids):

========================  =====================
runtime state             error
========================  =====================
unreachable / refused     RuntimeUnavailable (raised by the client: no answer)
answered a 5xx error      RuntimeAnswerError
model unknown to it       UnknownModel
prompt over the context   ContextLengthExceeded
refused the request (4xx) RuntimeRejected
no answer in time         RuntimeTimeout (raised by the client: no answer)
busy (HTTP 503 or 429)    RuntimeBusy
========================  =====================
"""

import json
import re
from typing import Any

from core.exceptions import (
    ContextLengthExceeded,
    RuntimeAnswerError,
    RuntimeBusy,
    RuntimeRejected,
    UnknownModel,
)

MESSAGE_LIMIT = 300

_TRACEBACK = re.compile(r"Traceback \(most recent call last\).*", re.S)
_PYTHON_FRAME = re.compile(r'File "[^"]*", line \d+(, in \S+)?')
# A path of two or more parts (/usr/lib/x.py, ./a/b, C:\x\y), with a trailing ", line N".
_PATH = re.compile(r"(?:[A-Za-z]:\\|\.{0,2}/)?(?:[\w.\-]+[/\\]){2,}[\w.\-]*(?:, line \d+)?")
_SPACES = re.compile(r"\s+")

_CONTEXT_PATTERNS = (
    # llama-cpp-python, vLLM: "maximum context length is 2048 tokens, however you requested
    # 150006 tokens (150000 in your prompt; 6 for the completion)" / "(150000 in the messages"
    re.compile(
        r"maximum context length is (?P<context_length>\d+) tokens.*?requested "
        r"(?P<requested_tokens>\d+) tokens(?: \((?P<prompt_tokens>\d+) in)?",
        re.I | re.S,
    ),
    # llama.cpp's server: "request (4476 tokens) exceeds the available context size (4096 ..."
    re.compile(
        r"request \((?P<requested_tokens>\d+) tokens\) exceeds the available context size "
        r"\((?P<context_length>\d+)",
        re.I,
    ),
    # llama-cpp-python's Llama: "Requested tokens (150006) exceed context window of 2048"
    re.compile(
        r"requested tokens \((?P<requested_tokens>\d+)\) exceed context window of "
        r"(?P<context_length>\d+)",
        re.I,
    ),
)
_CONTEXT_WORDS = (
    "exceeds the available context size",
    "exceeds the context length",
    "exceeds maximum context length",
    "exceed context window",
    "maximum context length",
    "context_length_exceeded",
    "exceed_context_size_error",
)


def _body(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def one_line(text: str) -> str:
    """``text`` without tracebacks, file paths or line breaks, cut to MESSAGE_LIMIT."""
    text = _TRACEBACK.sub("", text)
    text = _PYTHON_FRAME.sub("", text)
    text = _PATH.sub("…", text)
    text = _SPACES.sub(" ", text).strip()
    if len(text) > MESSAGE_LIMIT:
        text = text[: MESSAGE_LIMIT - 1] + "…"
    return text


def _detail_text(detail: Any) -> str:
    """FastAPI's 422 ``detail``: ``[{"loc": [...], "msg": ...}]`` as ``loc: msg; ...``."""
    if not isinstance(detail, list):
        return str(detail)
    parts = []
    for item in detail:
        if isinstance(item, dict):
            loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
            parts.append(f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", "")))
    return "; ".join(parts) or str(detail)


def raw_message(text: str) -> str:
    """The runtime's error message in an error answer's body (any runtime's shape)."""
    data = _body(text)
    if not isinstance(data, dict):
        return text
    error = data.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if error:
        return str(error)
    if "detail" in data:
        return _detail_text(data["detail"])
    if isinstance(data.get("message"), str):  # vLLM: {"object": "error", "message": ...}
        return data["message"]
    return str(data)


def error_message(text: str) -> str:
    """The runtime's message, fit to show a client: one line, no paths, no traceback."""
    return one_line(raw_message(text))


def is_unknown_model(status: int, message: str) -> bool:
    text = message.lower()
    return (
        status in (400, 404)
        and "model" in text
        and ("not found" in text or "does not exist" in text or "no such" in text)
    )


def context_overflow(text: str) -> dict[str, int] | None:
    """The numbers of a "prompt longer than the context" answer (``context_length``,
    ``requested_tokens``, ``prompt_tokens`` as far as the runtime says them), or None when
    the answer is about something else."""
    message = raw_message(text)
    data = _body(text)
    error = data.get("error") if isinstance(data, dict) else None
    numbers: dict[str, int] = {}
    if isinstance(error, dict):  # llama.cpp's server puts them in the error object
        for source, name in (("n_ctx", "context_length"), ("n_prompt_tokens", "prompt_tokens")):
            if isinstance(error.get(source), int):
                numbers[name] = error[source]
    for pattern in _CONTEXT_PATTERNS:
        match = pattern.search(message)
        if match:
            found = {k: int(v) for k, v in match.groupdict().items() if v is not None}
            return {**found, **numbers}
    lowered = f"{message} {error.get('type', '') if isinstance(error, dict) else ''}".lower()
    if numbers or any(words in lowered for words in _CONTEXT_WORDS):
        return numbers
    return None


# Runtime 4xx answers that say nothing about the client's request (our key, our URL).
_NOT_THE_CLIENTS = frozenset({401, 403, 404, 405, 407, 408})


def raise_for_answer(status: int, text: str, runtime: str, model: str) -> None:
    """Raises the error an answer other than 200 of the runtime named ``runtime`` means
    (with the runtime's own words); nothing for a 200."""
    if status == 200:
        return
    message = error_message(text)
    details = {"runtime": runtime, "runtime_status": status, "runtime_message": message}
    if status in (429, 503):
        raise RuntimeBusy(details=details)
    if is_unknown_model(status, message):
        raise UnknownModel(model, details=details)
    overflow = context_overflow(text)
    if overflow is not None:
        raise ContextLengthExceeded(details={**overflow, **details})
    if 400 <= status < 500 and status not in _NOT_THE_CLIENTS:
        raise RuntimeRejected(details=details)
    raise RuntimeAnswerError(details=details)


def unreadable(
    runtime: str, what: str = "answered something unreadable", said: str = ""
) -> RuntimeAnswerError:
    """The error of an answer that could not be read (``said``: what the reader said)."""
    details = {"runtime": runtime}
    if said:
        details["runtime_message"] = one_line(said)
    return RuntimeAnswerError(f"The model runtime {what}.", details=details)
