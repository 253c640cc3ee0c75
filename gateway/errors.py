"""The one error type of the service and the one place that turns errors into the envelope.

Every error answer, from any endpoint, is ``{"ok": false, "error", "message", "details"}``.
Business code raises :class:`ApiError`; DRF's exceptions, Django's 400/403/404/500 handlers
and anything unexpected are mapped here, so no endpoint answers HTML or ``{"detail": ...}``.
"""

import logging
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An error with its HTTP status, stable snake_case id, message and details object."""

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.details = details or {}
        self.headers = headers or {}


def error_body(error: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"ok": False, "error": error, "message": message, "details": details or {}}


def validation_error(fields: dict[str, list[str]], message: str = "Invalid input.") -> ApiError:
    return ApiError(400, "validation_error", message, details={"fields": fields})


def _field_errors(detail: Any) -> dict[str, list[str]]:
    """Flattens DRF's nested error detail into ``{field: [messages]}``."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for name, value in detail.items():
            if isinstance(value, dict):
                for sub, msgs in _field_errors(value).items():
                    out[f"{name}.{sub}"] = msgs
            elif isinstance(value, list):
                out[str(name)] = [str(v) for v in value if not isinstance(v, dict | list)] or [
                    "Invalid value."
                ]
            else:
                out[str(name)] = [str(value)]
        return out
    if isinstance(detail, list):
        return {"non_field_errors": [str(v) for v in detail]}
    return {"non_field_errors": [str(detail)]}


def _from_drf(exc: drf.APIException) -> ApiError:
    if isinstance(exc, drf.ValidationError):
        return validation_error(_field_errors(exc.detail))
    if isinstance(exc, drf.ParseError):
        return ApiError(400, "invalid_json", "The request body is not valid JSON.")
    if isinstance(exc, drf.UnsupportedMediaType):
        return ApiError(
            415,
            "unsupported_media_type",
            "The request body must be sent as application/json.",
            details={"content_type": exc.args[0] if exc.args else ""},
        )
    if isinstance(exc, drf.MethodNotAllowed):
        return ApiError(405, "method_not_allowed", str(exc.detail))
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return ApiError(401, "invalid_api_key", "A valid API key is required.")
    if isinstance(exc, drf.PermissionDenied):
        return ApiError(403, "forbidden", str(exc.detail))
    if isinstance(exc, drf.NotFound):
        return ApiError(404, "not_found", str(exc.detail))
    if isinstance(exc, drf.Throttled):
        wait = int(exc.wait or 1)
        return ApiError(
            429,
            "rate_limited",
            "Too many requests.",
            details={"retry_after": wait},
            headers={"Retry-After": str(wait)},
        )
    return ApiError(exc.status_code, "error", str(exc.detail))


def to_api_error(exc: Exception) -> ApiError:
    from django.core.exceptions import PermissionDenied, RequestDataTooBig
    from django.http import Http404

    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, drf.APIException):
        return _from_drf(exc)
    if isinstance(exc, Http404):
        return ApiError(404, "not_found", "Not found.")
    if isinstance(exc, PermissionDenied):
        return ApiError(403, "forbidden", "You may not do this.")
    if isinstance(exc, RequestDataTooBig):
        return payload_too_large()
    logger.exception("Unhandled error", exc_info=exc)
    return ApiError(500, "internal_error", "The server failed to handle this request.")


def payload_too_large() -> ApiError:
    from django.conf import settings

    return ApiError(
        413,
        "payload_too_large",
        "The request body is too large.",
        details={"max_bytes": settings.MAX_BODY_BYTES},
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception raised in a DRF view becomes the envelope."""
    err = to_api_error(exc)
    return Response(
        error_body(err.error, err.message, err.details), status=err.status, headers=err.headers
    )


def json_error(err: ApiError) -> JsonResponse:
    response = JsonResponse(error_body(err.error, err.message, err.details), status=err.status)
    for name, value in err.headers.items():
        response[name] = value
    return response


# Django's own handlers (config/urls.py) for errors raised outside DRF views.
def handler400(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(ApiError(400, "bad_request", "Bad request."))


def handler403(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(ApiError(403, "forbidden", "You may not do this."))


def csrf_failure(request: HttpRequest, reason: str = "") -> JsonResponse:
    """CSRF_FAILURE_VIEW: only session (admin) requests are CSRF-checked; API views are not."""
    return json_error(
        ApiError(403, "forbidden", "CSRF verification failed.", details={"reason": reason})
    )


@csrf_exempt
def handler404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(ApiError(404, "not_found", f"No endpoint at {request.path}."))


def handler500(request: HttpRequest) -> JsonResponse:
    return json_error(ApiError(500, "internal_error", "The server failed to handle this request."))
