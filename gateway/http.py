"""Reading request bodies the same way on every endpoint."""

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from gateway.errors import ApiError, json_error, payload_too_large


def invalid_json(message: str, **details: Any) -> ApiError:
    return ApiError(400, "invalid_json", message, details=details)


def is_json_content_type(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object, else 400 ``invalid_json`` (wrong type, malformed, not an
    object or empty)."""
    content_type = request.content_type or ""
    if not is_json_content_type(content_type):
        raise invalid_json(
            "The request body must be a JSON object sent as application/json.",
            content_type=content_type,
        )
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid_json("The request body is not valid JSON.", reason=str(exc)) from None
    if not isinstance(data, dict):
        raise invalid_json("The request body must be a JSON object.", got=type(data).__name__)
    return data


class BodySizeLimitMiddleware:
    """Refuses a body above MAX_BODY_BYTES with 413 before anything reads it.

    Django checks ``DATA_UPLOAD_MAX_MEMORY_SIZE`` only in ``request.body``; DRF's parsers read
    the stream directly, so the limit is enforced here for every endpoint.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return json_error(ApiError(400, "bad_request", "Content-Length is not a number."))
        if length > settings.MAX_BODY_BYTES:
            response = json_error(payload_too_large())
            response["Connection"] = "close"
            return response
        return self.get_response(request)
