"""The one place that turns errors into the envelope.

Every error answer, from any endpoint, is ``{"ok": false, "error", "message", "details"}``.
Business code raises the domain errors of :mod:`core.exceptions`; :data:`ERROR_TABLE` maps
each to its HTTP status and ``error`` id. DRF's exceptions, Django's 400/403/404/500 handlers
and anything unexpected are mapped here too, so no endpoint answers HTML or
``{"detail": ...}``.
"""

import logging
import sys
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseForbidden,
    HttpResponseServerError,
    JsonResponse,
)
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core import exceptions as ex
from core.db import is_database_unavailable

logger = logging.getLogger(__name__)

# Domain error -> (HTTP status, error id). A subclass not listed takes its nearest
# listed base's entry.
ERROR_TABLE: dict[type[ex.DomainError], tuple[int, str]] = {
    ex.DomainError: (400, "bad_request"),
    ex.BadRequest: (400, "bad_request"),
    ex.InvalidJson: (400, "invalid_json"),
    ex.InvalidInput: (400, "validation_error"),
    ex.UnknownProfile: (400, "unknown_profile"),
    ex.UnknownModel: (400, "unknown_model"),
    ex.RuntimeRejected: (400, "runtime_rejected"),
    ex.ContextLengthExceeded: (400, "context_length_exceeded"),
    ex.InvalidApiKey: (401, "invalid_api_key"),
    ex.Forbidden: (403, "forbidden"),
    ex.ModelNotAllowed: (403, "model_not_allowed"),
    ex.NotFound: (404, "not_found"),
    ex.JobNotFound: (404, "job_not_found"),
    ex.ConversationNotFound: (404, "conversation_not_found"),
    ex.JobNotCancellable: (409, "job_not_cancellable"),
    ex.ConversationBusy: (409, "conversation_busy"),
    ex.IdempotencyInProgress: (409, "idempotency_in_progress"),
    ex.IdempotencyKeyReused: (422, "idempotency_key_reused"),
    ex.InvalidWebhookUrl: (400, "invalid_webhook_url"),
    ex.JobCancelled: (409, "job_cancelled"),
    ex.JobFailed: (502, "job_failed"),
    ex.PayloadTooLarge: (413, "payload_too_large"),
    ex.RateLimited: (429, "rate_limited"),
    ex.TooManyJobs: (429, "too_many_jobs"),
    ex.BudgetExceeded: (429, "budget_exceeded"),
    ex.DatabaseUnavailable: (503, "database_unavailable"),
    ex.RuntimeFailure: (502, "runtime_error"),
    ex.RuntimeAnswerError: (502, "runtime_error"),
    ex.RuntimeUnavailable: (502, "runtime_unavailable"),
    ex.RuntimeBusy: (503, "runtime_busy"),
    ex.RuntimeTimeout: (504, "runtime_timeout"),
    ex.NotReady: (503, "not_ready"),
    ex.ServerBusy: (503, "server_busy"),
    ex.RequestTimeout: (408, "request_timeout"),
    ex.TooManyConnections: (429, "too_many_connections"),
}


# The OpenAI-compatible face (``/v1/``) answers the same errors in OpenAI's shape, with the
# status and ``code`` an OpenAI client expects where they differ: error id -> (status,
# code). Any other keeps its status and has its id as its code.
OPENAI_ERRORS: dict[str, tuple[int, str]] = {
    "invalid_json": (400, "invalid_json"),
    "validation_error": (400, "invalid_value"),
    "invalid_api_key": (401, "invalid_api_key"),
    "forbidden": (403, "forbidden"),
    "model_not_allowed": (403, "forbidden"),
    "unknown_model": (404, "model_not_found"),
    "unknown_profile": (404, "model_not_found"),
    "rate_limited": (429, "rate_limit_exceeded"),
}
# The ``type`` of OpenAI's error object by status (the SDKs' exception classes follow it).
OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    429: "rate_limit_error",
}


def status_and_id(exc: ex.DomainError) -> tuple[int, str]:
    """The HTTP status and ``error`` id of a domain error (also recorded in usage rows)."""
    for cls in type(exc).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls]
    raise TypeError(f"{type(exc).__name__} is not a DomainError")


def error_id(exc: ex.DomainError) -> str:
    return status_and_id(exc)[1]


@dataclass
class ErrorAnswer:
    """An error as it goes on the wire: status, id, message, details and headers."""

    status: int
    error: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"ok": False, "error": self.error, "message": self.message, "details": self.details}


def _from_domain(exc: ex.DomainError) -> ErrorAnswer:
    status, error = status_and_id(exc)
    retry_after = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return ErrorAnswer(status, error, exc.message, exc.details, headers)


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


def _from_drf(exc: drf.APIException) -> ErrorAnswer:
    if isinstance(exc, drf.ValidationError):
        return _from_domain(ex.InvalidInput(_field_errors(exc.detail)))
    if isinstance(exc, drf.ParseError):
        return _from_domain(ex.InvalidJson())
    if isinstance(exc, drf.UnsupportedMediaType):
        return ErrorAnswer(
            415,
            "unsupported_media_type",
            "The request body must be sent as application/json.",
            {"content_type": exc.args[0] if exc.args else ""},
        )
    if isinstance(exc, drf.MethodNotAllowed):
        return ErrorAnswer(405, "method_not_allowed", str(exc.detail))
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return ErrorAnswer(401, "invalid_api_key", "A valid API key is required.")
    if isinstance(exc, drf.PermissionDenied):
        return ErrorAnswer(403, "forbidden", str(exc.detail))
    if isinstance(exc, drf.NotFound):
        return ErrorAnswer(404, "not_found", str(exc.detail))
    if isinstance(exc, drf.Throttled):
        wait = int(exc.wait or 1)
        return ErrorAnswer(
            429,
            "rate_limited",
            "Too many requests.",
            {"retry_after": wait},
            {"Retry-After": str(wait)},
        )
    return ErrorAnswer(exc.status_code, "error", str(exc.detail))


def to_answer(exc: Exception) -> ErrorAnswer:
    from django.core.exceptions import PermissionDenied, RequestDataTooBig
    from django.http import Http404

    if isinstance(exc, ex.DomainError):
        return _from_domain(exc)
    if isinstance(exc, drf.APIException):
        return _from_drf(exc)
    if isinstance(exc, Http404):
        return ErrorAnswer(404, "not_found", "Not found.")
    if isinstance(exc, PermissionDenied):
        return ErrorAnswer(403, "forbidden", "You may not do this.")
    if isinstance(exc, RequestDataTooBig):
        return _from_domain(ex.PayloadTooLarge(settings.MAX_BODY_BYTES))
    if is_database_unavailable(exc):
        logger.warning("Database unavailable: %s", exc)
        return _from_domain(ex.DatabaseUnavailable())
    logger.exception("Unhandled error", exc_info=exc)
    return ErrorAnswer(500, "internal_error", "The server failed to handle this request.")


def openai_answer(exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, body and headers of an error on the OpenAI-compatible face:
    ``{"error": {"message", "type", "param", "code"}}``, from the same answer as the
    envelope's (:func:`to_answer`). ``param`` names the first field at fault."""
    answer = to_answer(exc)
    status, code = OPENAI_ERRORS.get(answer.error, (answer.status, answer.error))
    kind = OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    fields = answer.details.get("fields") or {}
    param = next(iter(fields), None)
    if param is not None:
        param = param.removeprefix("options.").removesuffix(".non_field_errors")
    if param is None and ("model" in answer.details or answer.error == "unknown_profile"):
        param = "model"
    message = answer.message
    if fields:
        message = "; ".join(f"{name}: {' '.join(texts)}" for name, texts in fields.items())
    error = {"message": message, "type": kind, "param": param, "code": code}
    return status, {"error": error}, answer.headers


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception raised in a DRF view becomes the envelope."""
    answer = to_answer(exc)
    return Response(answer.body(), status=answer.status, headers=answer.headers)


def json_error(exc: Exception | ErrorAnswer) -> JsonResponse:
    """The envelope as a plain Django response, for code outside DRF views."""
    answer = exc if isinstance(exc, ErrorAnswer) else to_answer(exc)
    response = JsonResponse(answer.body(), status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


# Django's own handlers (config/urls.py) for errors raised outside DRF views.
def handler400(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(ex.BadRequest())


def handler403(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(ex.Forbidden())


def _in_admin(request: HttpRequest) -> bool:
    """Whether the request is for the admin, which answers HTML pages (the API: JSON)."""
    try:
        return request.path.startswith(reverse("admin:index"))
    except NoReverseMatch:
        return False


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: only session (admin) requests are CSRF-checked; API views are not.
    The admin gets a page (templates/admin/403_csrf.html), anything else the envelope."""
    if _in_admin(request):
        page = render_to_string("admin/403_csrf.html", {"reason": reason}, request=request)
        return HttpResponseForbidden(page)
    return json_error(ex.Forbidden("CSRF verification failed.", details={"reason": reason}))


@csrf_exempt
def handler404(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return json_error(ex.NotFound(f"No endpoint at {request.path}."))


def handler500(request: HttpRequest) -> HttpResponse:
    # Django calls this while it handles the exception: it is the current one.
    if is_database_unavailable(sys.exc_info()[1]):
        return _database_unavailable(request)
    if _in_admin(request):
        # No request context: whatever failed may fail again while rendering one.
        return HttpResponseServerError(render_to_string("admin/500.html"))
    return json_error(
        ErrorAnswer(500, "internal_error", "The server failed to handle this request.")
    )


def _database_unavailable(request: HttpRequest) -> HttpResponse:
    answer = _from_domain(ex.DatabaseUnavailable())
    if not _in_admin(request):
        return json_error(answer)
    return HttpResponse(render_to_string("admin/503.html"), status=503, headers=answer.headers)
