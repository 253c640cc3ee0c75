"""Reading request bodies the same way on every endpoint.

Every JSON body, of ``/api.php`` and of the agent API, is parsed by :func:`parse_json`; the
request serializers then run :func:`check_values` over the whole parsed body before their
fields, so a value the database or the runtime cannot take never gets past the edge:

- nesting deeper than :data:`MAX_JSON_DEPTH` levels: 400 ``invalid_json``;
- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, though Python reads them): 400
  ``invalid_json``; a number too large for a double (``1e400``): 400 ``validation_error``;
- a NUL character or an unpaired UTF-16 surrogate (``"\\u0000"``, ``"\\ud800"``) in any
  string or key: 400 ``validation_error``, with the path of the value in ``details.fields``.
"""

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.parsers import JSONParser

from core.errors import json_error
from core.exceptions import BadRequest, InvalidInput, InvalidJson, NotFound, PayloadTooLarge

# Objects and arrays nest at most this deep (the body itself is level 1). Python's parser
# recurses per level and gives up near 1,000; no request of this API needs more than a few.
MAX_JSON_DEPTH = 64

UNSTORABLE_TEXT = "Must not contain NUL characters or unpaired surrogates."
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_unstorable(text: str) -> bool:
    """Whether ``text`` holds a NUL (PostgreSQL cannot store it) or an unpaired surrogate
    (UTF-8 cannot encode it). ASCII text, the usual case, costs one scan for NUL."""
    return "\x00" in text or (not text.isascii() and _SURROGATE.search(text) is not None)


def storable(text: str) -> str:
    """``text`` with each NUL and unpaired surrogate replaced by U+FFFD, for text that is
    stored but not ours to refuse: what a model answered, an error's message."""
    if not is_unstorable(text):
        return text
    return _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))


def invalid_json(message: str, **details: Any) -> InvalidJson:
    return InvalidJson(message, details=details)


def is_json_content_type(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


class _NotJsonNumber(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJsonNumber(name)


# One decoder for every body: json.loads with an option would build a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def parse_json(raw: bytes | str) -> Any:
    """The parsed body, else :class:`InvalidJson` with a message that names the problem in
    JSON's terms (never a Python exception's text)."""
    try:
        text = (
            raw if isinstance(raw, str) else raw.decode(json.detect_encoding(raw), "surrogatepass")
        )
        data = _DECODER.decode(text)
    except RecursionError:
        raise _too_deep() from None
    except _NotJsonNumber as exc:
        raise invalid_json(
            f"{exc} is not a JSON number; numbers must be finite.", value=str(exc)
        ) from None
    except json.JSONDecodeError as exc:
        raise invalid_json(
            "The request body is not valid JSON.",
            reason=exc.msg,
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except UnicodeDecodeError:
        raise invalid_json("The request body is not valid UTF-8.") from None
    except ValueError:
        # The only other ValueError of json.loads: an integer longer than Python converts.
        raise invalid_json("A number in the request body has too many digits.") from None
    if type(data) in (dict, list) and _too_deep_from(data):
        raise _too_deep()
    return data


def _too_deep() -> InvalidJson:
    return invalid_json(
        f"The request body is nested more than {MAX_JSON_DEPTH} levels deep.",
        max_depth=MAX_JSON_DEPTH,
    )


def _too_deep_from(data: Any) -> bool:
    """Whether objects and arrays nest deeper than MAX_JSON_DEPTH. It visits containers
    only, so its cost follows their number, not the body's size."""
    stack = [(data, 1)]
    while stack:
        value, level = stack.pop()
        if level > MAX_JSON_DEPTH:
            return True
        items = value.values() if type(value) is dict else value
        stack.extend((item, level + 1) for item in items if type(item) in (dict, list))
    return False


def _walk(data: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every key (as ``(path, key)``) and scalar value (``(path, value)``) of ``data``."""
    stack = [(path, data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if is_unstorable(key):
                    yield where, key  # reported at the parent: the key cannot be echoed
                    continue
                stack.append((f"{where}.{key}" if where else key, item))
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}" if where else str(i), v) for i, v in enumerate(value))
        else:
            yield where, value


def _all_storable(data: Any) -> bool:
    """The common case, cheaply: no bad string or number anywhere (no paths are built)."""
    stack = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            if is_unstorable(value):
                return False
        elif kind is dict:
            for key, item in value.items():
                if is_unstorable(key):
                    return False
                stack.append(item)
        elif kind is list:
            stack.extend(value)
        elif kind is float and not math.isfinite(value):
            return False
    return True


def value_problems(data: Any) -> dict[str, list[str]]:
    """``{path: [message]}`` for every string holding a NUL character or an unpaired
    surrogate and every number too large for a double, anywhere in ``data``."""
    if _all_storable(data):
        return {}
    problems: dict[str, list[str]] = {}
    for path, value in _walk(data):
        if isinstance(value, str) and is_unstorable(value):
            problems.setdefault(path or "non_field_errors", []).append(UNSTORABLE_TEXT)
        elif isinstance(value, float) and not math.isfinite(value):
            problems.setdefault(path or "non_field_errors", []).append("Must be a finite number.")
    return dict(sorted(problems.items()))


def check_values(data: Any) -> None:
    """:class:`InvalidInput` (400 ``validation_error``) listing :func:`value_problems`."""
    problems = value_problems(data)
    if problems:
        raise InvalidInput(problems)


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object, else 400 ``invalid_json`` (wrong type, malformed, too
    deep, not an object or empty)."""
    content_type = request.content_type or ""
    if not is_json_content_type(content_type):
        raise invalid_json(
            "The request body must be a JSON object sent as application/json.",
            content_type=content_type,
        )
    data = parse_json(request.body)
    if not isinstance(data, dict):
        raise invalid_json("The request body must be a JSON object.", got=type(data).__name__)
    return data


class JSONBodyParser(JSONParser):
    """DRF's parser of the agent API: the same :func:`parse_json` as ``/api.php``. (A
    ``JSONParser`` subclass, so DRF hands it the request's cached body, which stays readable
    after the view.)"""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        return parse_json(stream.read() if stream is not None else b"")


class HybridMiddleware:
    """Django's middleware API for a middleware that is synchronous and asynchronous alike:
    under ASGI it runs on the event loop and adds no thread to the request. A subclass
    writes :meth:`handle` (the synchronous chain) and ``__acall__`` (the asynchronous one)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self.async_mode:
            return self.__acall__(request)
        return self.handle(request)

    def handle(self, request: HttpRequest):
        raise NotImplementedError


class RefusingMiddleware(HybridMiddleware):
    """A middleware that answers a request itself when :meth:`refusal` returns a response,
    and passes it on otherwise."""

    def handle(self, request: HttpRequest) -> HttpResponse:
        return self.refusal(request) or self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        return self.refusal(request) or await self.get_response(request)

    @staticmethod
    def refusal(request: HttpRequest) -> HttpResponse | None:
        raise NotImplementedError


class BodySizeLimitMiddleware(RefusingMiddleware):
    """Refuses a body above MAX_BODY_BYTES with 413 before anything reads it.

    Django checks ``DATA_UPLOAD_MAX_MEMORY_SIZE`` only in ``request.body``; DRF's parsers read
    the stream directly, so the limit is enforced here for every endpoint. Synchronous and
    asynchronous: under ASGI it adds no thread to the request.
    """

    @staticmethod
    def refusal(request: HttpRequest) -> HttpResponse | None:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return json_error(BadRequest("Content-Length is not a number."))
        if length > settings.MAX_BODY_BYTES:
            response = json_error(PayloadTooLarge(settings.MAX_BODY_BYTES))
            response["Connection"] = "close"
            return response
        return None


class AdminUrlGuardMiddleware(RefusingMiddleware):
    """A NUL character in an admin URL is refused before the admin puts it in a query
    (PostgreSQL cannot take it: ``/admin/agents/job/%00/change/``, ``?q=%00``): 404 in the
    path, 400 in the query string. The API checks its own ids and parameters. Synchronous
    and asynchronous, as the body-size limit."""

    @staticmethod
    def refusal(request: HttpRequest) -> HttpResponse | None:
        if request.path_info.startswith("/admin/"):
            if "\x00" in request.path_info:
                return json_error(NotFound("No such page."))
            if any("\x00" in key or "\x00" in value for key, value in request.GET.items()):
                return json_error(BadRequest("The query string holds a NUL character."))
        return None
