"""The one module that talks to model runtimes over HTTP.

Two protocols: Ollama (``/api/generate``) and OpenAI-compatible (``/v1/completions``, or
``/v1/chat/completions`` for the ``openai-chat`` kind). The prompt is sent exactly as
given and alone: no history, and never Ollama's ``context``. Options are passed through
under Ollama's names, or mapped to OpenAI's. Failures become the contract's errors:

========================  ======  ======================
runtime state             status  error id
========================  ======  ======================
unreachable / refused     502     runtime_unavailable
answered an error         502     runtime_error
model unknown to it       400     unknown_model
no answer in time         504     runtime_timeout
busy (HTTP 503)           503     runtime_busy
========================  ======  ======================
"""

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings

from gateway import abortable, protocols, routing, session
from gateway.errors import ApiError
from gateway.routing import Endpoint

# Errors after which the next endpoint of the model is tried.
_FAILOVER_ERRORS = frozenset({"runtime_unavailable", "runtime_busy"})


class GenerationCancelled(Exception):
    """Raised when ``should_stop`` turned true while the model was generating."""


@dataclass
class Generation:
    text: str
    model: str
    endpoint: Endpoint
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


_session = session.make_session()


def _timeout() -> tuple[float, float]:
    return (settings.RUNTIME_CONNECT_TIMEOUT, settings.RUNTIME_READ_TIMEOUT)


def _headers(endpoint: Endpoint) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}


def _raise_for_status(response: requests.Response, endpoint: Endpoint, model: str) -> None:
    if response.status_code == 200:
        return
    message = protocols.error_message(response.text)
    details = {
        "runtime": endpoint.name,
        "runtime_status": response.status_code,
        "runtime_message": message,
    }
    if response.status_code == 503:
        raise ApiError(
            503, "runtime_busy", "The model runtime is busy; try again.", details=details
        )
    if protocols.is_unknown_model(response.status_code, message):
        raise ApiError(
            400,
            "unknown_model",
            f"The runtime does not know the model {model!r}.",
            details={"model": model, **details},
        )
    raise ApiError(
        502, "runtime_error", "The model runtime answered with an error.", details=details
    )


def _transport_error(exc: requests.RequestException, endpoint: Endpoint) -> ApiError:
    details = {"runtime": endpoint.name}
    # requests reports a read time-out inside a stream as a ConnectionError.
    timed_out = not isinstance(exc, requests.ConnectTimeout) and (
        isinstance(exc, requests.Timeout) or "timed out" in str(exc).lower()
    )
    if timed_out:
        return ApiError(
            504,
            "runtime_timeout",
            "The model runtime did not answer in time.",
            details={**details, "timeout_seconds": settings.RUNTIME_READ_TIMEOUT},
        )
    return ApiError(
        502, "runtime_unavailable", "The model runtime cannot be reached.", details=details
    )


def generate_at(endpoint: Endpoint, model: str, prompt: str, options: dict) -> Generation:
    """One non-streamed call to this endpoint only: no failover, no usage record."""
    url, body = protocols.generate_request(
        endpoint,
        model,
        prompt,
        options,
        stream=False,
        default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
    )
    try:
        response = _session.post(url, json=body, headers=_headers(endpoint), timeout=_timeout())
    except requests.RequestException as exc:
        raise _transport_error(exc, endpoint) from exc
    _raise_for_status(response, endpoint, model)
    try:
        text, p_tokens, c_tokens = protocols.parse_complete(endpoint, response.json())
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ApiError(
            502,
            "runtime_error",
            "The model runtime answered something unreadable.",
            details={"runtime": endpoint.name},
        ) from exc
    return Generation(
        text=text,
        model=model,
        endpoint=endpoint,
        prompt_tokens=p_tokens,
        completion_tokens=c_tokens,
    )


def _stream_once(
    endpoint: Endpoint, model: str, prompt: str, options: dict, should_stop: Callable[[], bool]
) -> Generation:
    """Streams the answer, asking ``should_stop`` about every JOB_CANCEL_POLL_SECONDS.

    The request is sent and the socket read in a helper thread, so that neither a runtime
    slow to answer at all (loading the model, reading a long prompt) nor one slow to send
    the next token keeps us from checking (a job's check also renews its lease). On stop
    the connection is cut, which ends the generation at the runtime.
    """
    url, body = protocols.generate_request(
        endpoint,
        model,
        prompt,
        options,
        stream=True,
        default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
    )
    items: queue.Queue = queue.Queue()
    call = abortable.Abortable()

    def pump() -> None:
        try:
            with call.sending():
                response = _session.post(
                    url, json=body, headers=_headers(endpoint), timeout=_timeout(), stream=True
                )
            if not call.attach_response(response):
                return
            items.put(response)
            if response.status_code == 200:
                for line in response.iter_lines():
                    if line:
                        items.put(line)
                items.put(None)
        except Exception as exc:  # delivered to the reading side
            items.put(exc)

    threading.Thread(target=pump, daemon=True, name="runtime-stream").start()
    pieces: list[str] = []
    usage: dict | None = None
    poll = settings.JOB_CANCEL_POLL_SECONDS
    # The first check is due one interval in: callers ask just before they call.
    next_check = time.monotonic() + poll
    try:
        while True:
            if time.monotonic() >= next_check:
                if should_stop():
                    raise GenerationCancelled()
                next_check = time.monotonic() + poll
            try:
                item = items.get(timeout=poll)
            except queue.Empty:
                continue
            if isinstance(item, requests.Response):
                _raise_for_status(item, endpoint, model)
                continue
            if item is None:
                break
            if isinstance(item, requests.RequestException):
                raise _transport_error(item, endpoint) from item
            if isinstance(item, Exception):
                raise ApiError(
                    502,
                    "runtime_error",
                    "The model runtime stream broke off.",
                    details={"runtime": endpoint.name, "runtime_message": str(item)},
                )
            try:
                piece, final, done = protocols.parse_chunk(endpoint, item)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise ApiError(
                    502,
                    "runtime_error",
                    "The model runtime sent an unreadable chunk.",
                    details={"runtime": endpoint.name, "runtime_message": str(exc)},
                ) from exc
            pieces.append(piece)
            if final is not None:
                usage = final
            if done:
                break
    finally:
        call.abort()
    p_tokens, c_tokens = protocols.stream_usage(endpoint, usage)
    return Generation(
        text="".join(pieces),
        model=model,
        endpoint=endpoint,
        prompt_tokens=p_tokens,
        completion_tokens=c_tokens,
    )


_SERVED_TTL = 30.0


def _require_served(endpoint: Endpoint, model: str) -> None:
    """400 unknown_model if an OpenAI-compatible runtime does not list the model.

    Some servers (llama.cpp's, llama-cpp-python's) answer any model name with the one model
    they have; asking ``/v1/models`` (cached per endpoint) keeps a typo from being served
    silently. When the list cannot be had, the call itself will tell.
    """
    name = endpoint.model_name(model)
    now = time.monotonic()
    cached = routing.served_models.get(endpoint.base_url)
    if (
        cached is None
        or now - cached[0] > _SERVED_TTL
        or (name not in cached[1] and now - cached[0] > 5.0)
    ):
        try:
            cached = (now, frozenset(list_models(endpoint)))
        except ApiError:
            return
        routing.served_models[endpoint.base_url] = cached
    if cached[1] and name not in cached[1]:
        raise ApiError(
            400,
            "unknown_model",
            f"The runtime does not know the model {model!r}.",
            details={"model": model, "runtime": endpoint.name, "available": sorted(cached[1])[:50]},
        )


def generate(
    model: str,
    prompt: str,
    options: dict[str, Any] | None = None,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> Generation:
    """Runs ``prompt`` on ``model`` and returns the whole answer.

    With ``should_stop`` the answer is streamed and the call raises
    :class:`GenerationCancelled` soon after ``should_stop()`` returns true.
    """
    options = options or {}
    last_error: ApiError | None = None
    for endpoint in routing.endpoints_for(model):
        try:
            if endpoint.api != "ollama":
                _require_served(endpoint, model)
            if should_stop is None:
                return generate_at(endpoint, model, prompt, options)
            return _stream_once(endpoint, model, prompt, options, should_stop)
        except ApiError as err:
            if err.error not in _FAILOVER_ERRORS:
                raise
            routing.mark_failed(endpoint)
            last_error = err
    assert last_error is not None
    raise last_error


def list_models(endpoint: Endpoint) -> list[str]:
    """The models the runtime says it serves (raises ApiError when it cannot be asked)."""
    try:
        response = _session.get(
            f"{endpoint.base_url}{protocols.models_path(endpoint)}",
            headers=_headers(endpoint),
            timeout=_timeout(),
        )
    except requests.RequestException as exc:
        raise _transport_error(exc, endpoint) from exc
    _raise_for_status(response, endpoint, "")
    return protocols.parse_models(endpoint, response.json())


def iter_endpoints() -> Iterator[tuple[Endpoint, list[str]]]:
    yield from routing.all_endpoints()


# --- Token counting ------------------------------------------------------------------------
#
# Runtimes that have a tokenizer endpoint count a text exactly for the model they serve:
# Ollama ``POST /api/tokenize``, llama.cpp's server ``POST /tokenize`` and llama-cpp-python's
# ``POST /extras/tokenize/count``. Which one an endpoint has (or that it has none) is learnt
# on first use and kept per endpoint for TOKENIZER_MEMORY_SECONDS, so a runtime without one
# costs one probe, not one per text. A failed call (runtime down, model unknown) returns
# None, and callers fall back to their heuristic.

TOKENIZER_MEMORY_SECONDS = 600.0
# Counting is on the request path of a chat: it must not wait as long as a generation.
_TOKENIZE_READ_TIMEOUT = 5.0
_NO_TOKENIZER = ""  # remembered path meaning "this endpoint has none"
_tokenizers: dict[tuple[str, str], tuple[str, float]] = {}


def count_tokens(model: str, text: str) -> int | None:
    """The number of tokens of ``text`` by ``model``'s runtime tokenizer, or None when the
    runtime has no tokenizer endpoint or cannot be asked now."""
    endpoint = routing.endpoints_for(model)[0]
    key = (endpoint.base_url, endpoint.api)
    remembered = _tokenizers.get(key)
    if remembered and remembered[1] > time.monotonic():
        paths: tuple[str, ...] = (remembered[0],) if remembered[0] else ()
    else:
        paths = protocols.TOKENIZE_PATHS.get(endpoint.api, ())
    for path in paths:
        try:
            response = _session.post(
                f"{endpoint.base_url}{path}",
                json=protocols.tokenize_body(path, endpoint.model_name(model), text),
                headers=_headers(endpoint),
                timeout=(settings.RUNTIME_CONNECT_TIMEOUT, _TOKENIZE_READ_TIMEOUT),
            )
        except requests.RequestException:
            return None  # down for now: nothing learnt about its tokenizer
        if response.status_code in (404, 405, 501):
            if protocols.is_unknown_model(
                response.status_code, protocols.error_message(response.text)
            ):
                return None  # the path exists; the model does not
            continue  # not this runtime's tokenizer path
        if response.status_code != 200:
            return None
        try:
            count = protocols.token_count(response.json())
        except ValueError:
            count = None
        if count is not None:
            _tokenizers[key] = (path, time.monotonic() + TOKENIZER_MEMORY_SECONDS)
        return count
    _tokenizers[key] = (_NO_TOKENIZER, time.monotonic() + TOKENIZER_MEMORY_SECONDS)
    return None


def forget_tokenizers() -> None:
    """Forgets which endpoints have a tokenizer (after a runtime changed, and in tests)."""
    _tokenizers.clear()
