"""The one module that talks to model runtimes over HTTP.

Two protocols: Ollama (``/api/generate``) and OpenAI-compatible (``/v1/completions``, or
``/v1/chat/completions`` for the ``openai-chat`` kind). The prompt is sent exactly as
given and alone: no history, and never Ollama's ``context``. An agent may send chat
``messages`` instead (Ollama ``/api/chat``, ``/v1/chat/completions``): the whole context
of that one call, still stateless. Options are passed through under Ollama's names, or
mapped to OpenAI's. Failures raise the domain errors of :mod:`core.exceptions`
(``core.errors`` gives their statuses and ids):

========================  =====================
runtime state             error
========================  =====================
unreachable / refused     RuntimeUnavailable
answered a 5xx error      RuntimeAnswerError
model unknown to it       UnknownModel
prompt over the context   ContextLengthExceeded
refused the request (4xx) RuntimeRejected
no answer in time         RuntimeTimeout
busy (HTTP 503 or 429)    RuntimeBusy
========================  =====================
"""

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
from django.conf import settings

from core import metrics, requestid, tracing
from core.errors import error_id
from core.exceptions import (
    ContextLengthExceeded,
    RuntimeAnswerError,
    RuntimeBusy,
    RuntimeFailure,
    RuntimeRejected,
    RuntimeTimeout,
    RuntimeUnavailable,
    UnknownModel,
)
from gateway import abortable, protocols, routing, runtime_errors, session
from gateway.routing import Endpoint

# Runtime 4xx answers that say nothing about the client's request (our key, our URL).
_NOT_THE_CLIENTS = frozenset({401, 403, 404, 405, 407, 408})
# Errors after which the next endpoint of the model is tried.
FAILOVER_ERRORS = (RuntimeUnavailable, RuntimeBusy)


class GenerationCancelled(Exception):
    """Raised when ``should_stop`` turned true while the model was generating."""


@dataclass
class Generation:
    text: str
    model: str
    endpoint: Endpoint
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"  # or "length": OpenAI's words
    # True when the runtime reported no counts and they were counted with the model's
    # tokenizer afterwards (:func:`gateway.services.counted`).
    tokens_estimated: bool = False


_session = session.make_session()


def _timeout() -> tuple[float, float]:
    return (settings.RUNTIME_CONNECT_TIMEOUT, settings.RUNTIME_READ_TIMEOUT)


def headers_for(endpoint: Endpoint) -> dict[str, str]:
    """The endpoint's key, and the id of the request the call is made for."""
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    rid = requestid.current()
    if rid:
        headers[requestid.HEADER] = rid
    return headers


def _raise_for_status(response: requests.Response, endpoint: Endpoint, model: str) -> None:
    if response.status_code != 200:  # a stream's body is read only then
        raise_for_answer(response.status_code, response.text, endpoint, model)


def raise_for_answer(status: int, text: str, endpoint: Endpoint, model: str) -> None:
    """Raises the error an answer other than 200 means (with the runtime's own words)."""
    if status == 200:
        return
    message = runtime_errors.error_message(text)
    details = {"runtime": endpoint.name, "runtime_status": status, "runtime_message": message}
    if status in (429, 503):
        raise RuntimeBusy(details=details)
    if runtime_errors.is_unknown_model(status, message):
        raise UnknownModel(model, details=details)
    overflow = runtime_errors.context_overflow(text)
    if overflow is not None:
        raise ContextLengthExceeded(details={**overflow, **details})
    if 400 <= status < 500 and status not in _NOT_THE_CLIENTS:
        raise RuntimeRejected(details=details)
    raise RuntimeAnswerError(details=details)


def _transport_error(exc: requests.RequestException, endpoint: Endpoint) -> RuntimeFailure:
    details = {"runtime": endpoint.name}
    # requests reports a read time-out inside a stream as a ConnectionError.
    timed_out = not isinstance(exc, requests.ConnectTimeout) and (
        isinstance(exc, requests.Timeout) or "timed out" in str(exc).lower()
    )
    if timed_out:
        return RuntimeTimeout(details={**details, "timeout_seconds": settings.RUNTIME_READ_TIMEOUT})
    return RuntimeUnavailable(details=details)


Messages = list[dict[str, str]] | None


def _request(
    endpoint: Endpoint, model: str, prompt: str, messages: Messages, options: dict, stream: bool
) -> tuple[str, dict[str, Any]]:
    build = protocols.generate_request if messages is None else protocols.chat_request
    return build(
        endpoint,
        model,
        prompt if messages is None else messages,
        options,
        stream=stream,
        default_max_tokens=settings.RUNTIME_DEFAULT_MAX_TOKENS,
    )


def generate_at(
    endpoint: Endpoint, model: str, prompt: str, options: dict, messages: Messages = None
) -> Generation:
    """One non-streamed call to this endpoint only: no failover, no usage record."""
    url, body = _request(endpoint, model, prompt, messages, options, stream=False)
    try:
        response = _session.post(url, json=body, headers=headers_for(endpoint), timeout=_timeout())
    except requests.RequestException as exc:
        raise _transport_error(exc, endpoint) from exc
    _raise_for_status(response, endpoint, model)
    try:
        data = response.json()
    except ValueError as exc:
        raise unreadable(endpoint) from exc
    return generation_from(endpoint, model, data)


def unreadable(endpoint: Endpoint) -> RuntimeAnswerError:
    return RuntimeAnswerError(
        "The model runtime answered something unreadable.", details={"runtime": endpoint.name}
    )


def generation_from(endpoint: Endpoint, model: str, data: Any) -> Generation:
    """The generation in the JSON of a whole (non-streamed) 200 answer."""
    try:
        text, p_tokens, c_tokens = protocols.parse_complete(endpoint, data)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise unreadable(endpoint) from exc
    return Generation(
        text=text,
        model=model,
        endpoint=endpoint,
        prompt_tokens=p_tokens,
        completion_tokens=c_tokens,
        finish_reason=protocols.finish_reason(endpoint, data),
    )


def _stream_once(
    endpoint: Endpoint,
    model: str,
    prompt: str,
    options: dict,
    should_stop: Callable[[], bool],
    messages: Messages = None,
) -> Generation:
    """Streams the answer, asking ``should_stop`` about every JOB_CANCEL_POLL_SECONDS.

    The request is sent and the socket read in a helper thread, so that neither a runtime
    slow to answer at all (loading the model, reading a long prompt) nor one slow to send
    the next token keeps us from checking (a job's check also renews its lease). On stop
    the connection is cut, which ends the generation at the runtime.
    """
    url, body = _request(endpoint, model, prompt, messages, options, stream=True)
    headers = headers_for(endpoint)  # here: the helper thread has not the request's context
    items: queue.Queue = queue.Queue()
    call = abortable.Abortable()
    sent = time.perf_counter()
    first_token: float | None = None

    def pump() -> None:
        try:
            with call.sending():
                response = _session.post(
                    url, json=body, headers=headers, timeout=_timeout(), stream=True
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
                raise RuntimeAnswerError(
                    "The model runtime stream broke off.",
                    details={
                        "runtime": endpoint.name,
                        "runtime_message": runtime_errors.one_line(str(item)),
                    },
                )
            try:
                piece, final, done = protocols.parse_chunk(endpoint, item)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise RuntimeAnswerError(
                    "The model runtime sent an unreadable chunk.",
                    details={
                        "runtime": endpoint.name,
                        "runtime_message": runtime_errors.one_line(str(exc)),
                    },
                ) from exc
            if piece and first_token is None:
                first_token = time.perf_counter() - sent
                metrics.observe_time_to_first_token(model, first_token)
                tracing.set_attributes(
                    tracing.current_span(), **{"llm.time_to_first_token": first_token}
                )
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
    """:class:`UnknownModel` if an OpenAI-compatible runtime does not list the model.

    Some servers (llama.cpp's, llama-cpp-python's) answer any model name with the one model
    they have; asking ``/v1/models`` (cached per endpoint) keeps a typo from being served
    silently. When the list cannot be had, the call itself will tell.
    """
    if served_list_is_stale(endpoint, model):
        try:
            served = list_models(endpoint)
        except RuntimeFailure:
            return
        routing.served_models[endpoint.base_url] = (time.monotonic(), frozenset(served))
    check_served(endpoint, model)


def served_list_is_stale(endpoint: Endpoint, model: str) -> bool:
    """Whether the runtime's list of models is to be asked for (again)."""
    cached = routing.served_models.get(endpoint.base_url)
    if cached is None:
        return True
    age = time.monotonic() - cached[0]
    return age > _SERVED_TTL or (endpoint.model_name(model) not in cached[1] and age > 5.0)


def check_served(endpoint: Endpoint, model: str) -> None:
    """:class:`UnknownModel` if the runtime's known list of models lacks ``model``."""
    cached = routing.served_models.get(endpoint.base_url)
    if cached and cached[1] and endpoint.model_name(model) not in cached[1]:
        raise UnknownModel(
            model, details={"runtime": endpoint.name, "available": sorted(cached[1])[:50]}
        )


def generate(
    model: str,
    prompt: str,
    options: dict[str, Any] | None = None,
    *,
    should_stop: Callable[[], bool] | None = None,
    messages: Messages = None,
) -> Generation:
    """Runs ``prompt`` on ``model`` and returns the whole answer.

    With ``messages`` (chat messages, ``role`` and ``content``) those are sent instead of
    ``prompt``, to the endpoint's chat path. With ``should_stop`` the answer is streamed
    and the call raises :class:`GenerationCancelled` soon after ``should_stop()`` is true.
    """
    options = options or {}
    last_error: RuntimeFailure | None = None
    for endpoint in routing.endpoints_for(model):
        try:
            if endpoint.api != "ollama":
                _require_served(endpoint, model)
            with observed_call(model, endpoint, streamed=should_stop is not None) as observe:
                if should_stop is None:
                    generation = generate_at(endpoint, model, prompt, options, messages)
                else:
                    generation = _stream_once(
                        endpoint, model, prompt, options, should_stop, messages
                    )
                observe(generation)
            return generation
        except RuntimeFailure as err:
            if not isinstance(err, FAILOVER_ERRORS):
                raise
            routing.mark_failed(endpoint)
            last_error = err
    assert last_error is not None
    raise last_error


@contextlib.contextmanager
def observed_call(
    model: str, endpoint: Endpoint, *, streamed: bool = False
) -> Iterator[Callable[[Generation], None]]:
    """The metrics and span of one generation call to ``endpoint``: the block calls the
    function it gets with the generation; an error leaving the block is its outcome."""
    started = time.perf_counter()
    traced = (
        tracing.span("runtime.generate", **{"llm.model": model, "llm.endpoint": endpoint.name})
        if tracing.enabled()
        else contextlib.nullcontext()
    )
    with traced as span:

        def observe(generation: Generation) -> None:
            if span is None:
                return
            tracing.set_attributes(
                span,
                **{
                    "llm.prompt_tokens": generation.prompt_tokens,
                    "llm.completion_tokens": generation.completion_tokens,
                    "llm.streamed": streamed,
                },
            )

        try:
            yield observe
        except RuntimeFailure as err:
            metrics.observe_runtime_call(model, endpoint.name, error_id(err), started)
            raise
        except BaseException as exc:  # stopped (a job's cancel, a client gone) or a bug
            stopped = isinstance(exc, GenerationCancelled) or type(exc).__name__ == "CancelledError"
            outcome = "cancelled" if stopped else "internal_error"
            metrics.observe_runtime_call(model, endpoint.name, outcome, started)
            raise
        metrics.observe_runtime_call(model, endpoint.name, "ok", started)


def list_models(endpoint: Endpoint) -> list[str]:
    """The models the runtime says it serves (raises a RuntimeFailure when it cannot
    be asked)."""
    try:
        response = _session.get(
            f"{endpoint.base_url}{protocols.models_path(endpoint)}",
            headers=headers_for(endpoint),
            timeout=_timeout(),
        )
    except requests.RequestException as exc:
        raise _transport_error(exc, endpoint) from exc
    _raise_for_status(response, endpoint, "")
    return protocols.parse_models(endpoint, response.json())


def probe(endpoint: Endpoint, *, timeout: float) -> str:
    """The runtime's state, learnt within about ``timeout`` seconds: ``ok``; ``busy`` when it
    took the connection but did not answer in time, or answered 503/429 (a single-slot
    runtime generating: up); otherwise the error id of why it is not up."""
    try:
        response = _session.get(
            f"{endpoint.base_url}{protocols.models_path(endpoint)}",
            headers=headers_for(endpoint),
            timeout=(timeout, timeout),
        )
    except requests.ReadTimeout:
        return "busy"
    except requests.RequestException as exc:
        return error_id(_transport_error(exc, endpoint))
    try:
        _raise_for_status(response, endpoint, "")
    except RuntimeBusy:
        return "busy"
    except RuntimeFailure as err:
        return error_id(err)
    return "ok"


def post_json(
    endpoint: Endpoint, path: str, body: dict[str, Any], *, model: str, read_timeout: float
) -> Any:
    """One JSON POST to ``endpoint`` (no failover) through the shared session, with the
    runtime errors of the table above; the parsed answer."""
    try:
        response = _session.post(
            f"{endpoint.base_url}{path}",
            json=body,
            headers=headers_for(endpoint),
            timeout=(settings.RUNTIME_CONNECT_TIMEOUT, read_timeout),
        )
    except requests.RequestException as exc:
        raise _transport_error(exc, endpoint) from exc
    _raise_for_status(response, endpoint, model)
    try:
        return response.json()
    except ValueError as exc:
        raise RuntimeAnswerError(
            "The model runtime answered something unreadable.",
            details={"runtime": endpoint.name},
        ) from exc


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
                headers=headers_for(endpoint),
                timeout=(settings.RUNTIME_CONNECT_TIMEOUT, _TOKENIZE_READ_TIMEOUT),
            )
        except requests.RequestException:
            return None  # down for now: nothing learnt about its tokenizer
        if response.status_code in (404, 405, 501):
            if runtime_errors.is_unknown_model(
                response.status_code, runtime_errors.error_message(response.text)
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
