"""How the OpenAPI schema documents error answers: per operation and status, the error ids
that operation can answer, as an enum (so a client, and the schema tests, know them all)."""

from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema_field,
)
from rest_framework import serializers

from core.serializers import ErrorResponseSerializer


def merge(*tables: dict[int, Iterable[str]]) -> dict[int, tuple[str, ...]]:
    merged: dict[int, list[str]] = {}
    for table in tables:
        for status, ids in table.items():
            merged.setdefault(status, [])
            merged[status] += [i for i in ids if i not in merged[status]]
    return {status: tuple(ids) for status, ids in sorted(merged.items())}


# What any operation may answer, whatever it does. (A method an endpoint does not have is
# 405 method_not_allowed: that is no operation, so the schema cannot list it.)
ANY_ENDPOINT: dict[int, tuple[str, ...]] = {
    # The server's time limits for a request's headers and body (config/gunicorn_worker.py).
    408: ("request_timeout",),
    413: ("payload_too_large",),
    500: ("internal_error",),
    # The web process's connection limit (config/gunicorn_worker.py); the database out of
    # reach (core.db.is_database_unavailable), with Retry-After.
    503: ("server_busy", "database_unavailable"),
}
# The key checks of the /agent/... endpoints.
AGENT_KEY: dict[int, tuple[str, ...]] = {
    401: ("invalid_api_key",),
    403: ("forbidden",),
    429: ("rate_limited",),  # the key's agent API limits (gateway.ratelimit.AgentRateLimit)
}
# Starting a job: the key's limit of jobs queued or running at once.
JOB_QUOTA: dict[int, tuple[str, ...]] = {429: ("too_many_jobs", "budget_exceeded")}
# A JSON body read by DRF's parser.
JSON_BODY: dict[int, tuple[str, ...]] = {
    400: ("invalid_json", "validation_error"),
    415: ("unsupported_media_type",),
}

# A write that takes an Idempotency-Key (agents/idempotency.py).
IDEMPOTENT: dict[int, tuple[str, ...]] = {
    400: ("validation_error",),  # a key that is not 1 to 255 printable ASCII characters
    409: ("idempotency_in_progress",),  # with Retry-After
    422: ("idempotency_key_reused",),
}
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Names this request within the key's owner (1 to 255 printable ASCII characters). A "
        "repeat with the same key, method, path and JSON body within IDEMPOTENCY_TTL (24 h) "
        "answers the first answer again, byte for byte, with `Idempotent-Replayed: true`, and "
        "does nothing else (4xx answers too; 5xx are not stored). Another body: 422 "
        "`idempotency_key_reused`; the first still being handled: 409 "
        "`idempotency_in_progress` with Retry-After."
    ),
)
# Starting a job (a task, a chat): a write that takes an Idempotency-Key and counts
# against the key's jobs.
JOB_START_ERRORS: dict[int, tuple[str, ...]] = merge(
    ANY_ENDPOINT,
    AGENT_KEY,
    JSON_BODY,
    JOB_QUOTA,
    IDEMPOTENT,
    {400: ("unknown_profile", "invalid_webhook_url")},
)
REPLAYED_HEADER = {
    "Idempotent-Replayed": {
        "description": "`true` when the answer is the stored answer of an earlier request "
        "with the same Idempotency-Key.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}


# Every error id documented for a status, over all operations: the enum of that status's
# one component (``Error400``, ...). Filled while the views' modules load, read when the
# schema is generated.
_IDS_BY_STATUS: dict[int, list[str]] = {}
_SHAPES: dict[int, type[ErrorResponseSerializer]] = {}
# An error id's example answer, as the service words it (the ids without one get a
# generic message).
MESSAGES: dict[str, str] = {
    "invalid_api_key": "Invalid or missing API key.",
    "forbidden": 'This key does not have the "agent" scope.',
    "validation_error": "Invalid input.",
    "unknown_profile": "Unknown agent profile 'nightly'.",
    "job_not_found": "No such job.",
    "conversation_not_found": "No such conversation.",
    "job_not_cancellable": "The job is finished and cannot be cancelled.",
    "rate_limited": "Too many requests: at most 120 a minute for this key.",
    "too_many_jobs": "Too many jobs queued or running for this key (at most 100).",
    "unknown_model": "Unknown model 'gpt-9'.",
    "database_unavailable": "The database cannot be reached; try again shortly.",
}


def _shape(status: int) -> type[ErrorResponseSerializer]:
    """The one component of ``status``'s error answers, made on first use."""
    if status not in _SHAPES:
        ids = _IDS_BY_STATUS.setdefault(status, [])
        # A CharField documented as an enum: the ids are documentation, not validation.
        # The list is the one in _IDS_BY_STATUS: ids added by later operations join it.
        field = extend_schema_field({"type": "string", "enum": ids})(
            type(f"Error{status}Field", (serializers.CharField,), {})
        )
        error = field(help_text=f"Stable snake_case error id of a {status} answer.")
        _SHAPES[status] = type(
            f"Error{status}Serializer", (ErrorResponseSerializer,), {"error": error}
        )
    return _SHAPES[status]


def _example(status: int, error: str) -> OpenApiExample:
    details = (
        {"fields": {"task": ["This field is required."]}} if error == "validation_error" else {}
    )
    message = MESSAGES.get(error, error.replace("_", " ").capitalize() + ".")
    return OpenApiExample(
        error,
        value={"ok": False, "error": error, "message": message, "details": details},
        status_codes=[str(status)],
        response_only=True,
    )


def error_responses(operation: str, *tables: dict[int, Iterable[str]]) -> dict:
    """The error answers of one operation: per status, the one component of that status
    (``Error<status>``, its ``error`` an enum of every id any operation answers with it),
    described with the ids this operation answers (``operation`` names it in errors)."""
    responses = {}
    for status, ids in merge(*tables).items():
        known = _IDS_BY_STATUS.setdefault(status, [])
        known += [i for i in ids if i not in known]
        responses[status] = OpenApiResponse(
            _shape(status),
            description=", ".join(f"`{i}`" for i in ids),
            examples=[_example(status, i) for i in ids],
        )
    return responses


def _link(operation: str, parameter: str, pointer: str, description: str) -> dict:
    return {
        "operationId": operation,
        "parameters": {parameter: f"$response.body#{pointer}"},
        "description": description,
    }


# What a success answer leads to: OpenAPI links, which clients and schemathesis' stateful
# tests follow (a started job's id feeds its status and cancel calls).
LINKS: dict[str, dict[str, dict]] = {
    "job_start": {
        "JobStatus": _link("job_status", "job_id", "/data/job_id", "The started job."),
        "JobCancel": _link("job_cancel", "job_id", "/data/job_id", "Cancel the started job."),
    },
    "chat_start": {
        "JobStatus": _link("job_status", "job_id", "/data/job_id", "The chat's job."),
        "JobCancel": _link("job_cancel", "job_id", "/data/job_id", "Cancel the chat's job."),
        "Conversation": _link(
            "conversation_get", "conversation_id", "/data/conversation_id", "Its messages."
        ),
    },
}


def add_links(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: puts :data:`LINKS` on the 200 answers, and the
    ``Idempotent-Replayed`` header on the answers of operations that take an
    ``Idempotency-Key``."""
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            links = LINKS.get(operation.get("operationId"))
            if links:
                operation["responses"]["200"]["links"] = links
            idempotent = any(
                p.get("name") == "Idempotency-Key" for p in operation.get("parameters", ())
            )
            if idempotent:
                for answer in operation["responses"].values():
                    answer["headers"] = {**answer.get("headers", {}), **REPLAYED_HEADER}
    return result


# --- Examples of success answers: the demo profile, plausible scope ids -----------------------


def example(name: str, *, request: Any = None, answer: Any = None) -> list[OpenApiExample]:
    """A request body (when the operation has one) and its 200 answer, as Swagger UI's
    "Try it out" fills them in."""
    examples = []
    if request is not None:
        examples.append(OpenApiExample(name, value=request, request_only=True))
    if answer is not None:
        examples.append(
            OpenApiExample(name, value=answer, response_only=True, status_codes=["200"])
        )
    return examples
