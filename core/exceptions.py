"""The errors business code raises. They carry a message and details, never an HTTP status:
``core.errors`` maps each class to its status and ``error`` id in one table.

Services, selectors, the runtime client and the job runner raise and catch these; only the
exception handler knows what they look like on the wire.
"""

from typing import Any


class DomainError(Exception):
    """A failure the caller can be told about: a message and a details object."""

    default_message = "The request failed."

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None):
        self.message = message or self.default_message
        self.details = dict(details or {})
        super().__init__(self.message)


# --- Input ---------------------------------------------------------------------------------


class InvalidJson(DomainError):
    default_message = "The request body is not valid JSON."


class InvalidInput(DomainError):
    """Field problems: ``fields`` is ``{name: [messages]}``."""

    default_message = "Invalid input."

    def __init__(self, fields: dict[str, list[str]], message: str | None = None):
        super().__init__(message, details={"fields": fields})
        self.fields = fields


class PayloadTooLarge(DomainError):
    default_message = "The request body is too large."

    def __init__(self, max_bytes: int):
        super().__init__(details={"max_bytes": max_bytes})


class FieldTooLarge(PayloadTooLarge):
    """A text field longer than its limit (the body itself was within ``MAX_BODY_BYTES``)."""

    def __init__(self, *, field: str, max_chars: int, chars: int):
        DomainError.__init__(
            self,
            f"{field} may be at most {max_chars:,} characters long; this one has {chars:,}.",
            details={"field": field, "max_chars": max_chars, "chars": chars},
        )


class BadRequest(DomainError):
    default_message = "Bad request."


# --- Keys and permissions ------------------------------------------------------------------


class InvalidApiKey(DomainError):
    default_message = "The API key is missing, unknown, revoked or expired."


class Forbidden(DomainError):
    default_message = "You may not do this."


class ModelNotAllowed(DomainError):
    def __init__(self, model: str):
        super().__init__(f"This key may not use the model {model!r}.", details={"model": model})


class RateLimited(DomainError):
    def __init__(self, *, limit: int, retry_after: int):
        super().__init__(
            f"This key may make {limit} requests per minute.",
            details={"limit_per_minute": limit, "retry_after": retry_after},
        )
        self.retry_after = retry_after


class BudgetExceeded(DomainError):
    def __init__(self, *, budget: int, period: str, spent: int, reset_at: str, retry_after: int):
        super().__init__(
            f"This key has spent its budget of {budget} tokens for this {period}.",
            details={
                "token_budget": budget,
                "budget_period": period,
                "tokens_spent": spent,
                "reset_at": reset_at,
                "retry_after": retry_after,
            },
        )
        self.retry_after = retry_after


class TooManyJobs(DomainError):
    def __init__(self, *, limit: int):
        super().__init__(
            f"This key may have {limit} jobs queued or running at once; wait for one to end.",
            details={"max_active_jobs": limit, "retry_after": 5},
        )
        self.retry_after = 5


# --- Lookups -------------------------------------------------------------------------------


class NotFound(DomainError):
    default_message = "Not found."


class JobNotFound(NotFound):
    def __init__(self, job_id: str):
        super().__init__("No job with this id.", details={"job_id": job_id})


class ConversationNotFound(NotFound):
    def __init__(self, conversation_id: str):
        super().__init__(
            "No conversation with this id.", details={"conversation_id": conversation_id}
        )


class UnknownProfile(DomainError):
    def __init__(self, name: str | None):
        super().__init__(f"No agent profile named {name!r}.", details={"profile": name})


# --- Jobs ----------------------------------------------------------------------------------


class JobNotCancellable(DomainError):
    def __init__(self, *, job_id: str, status: str):
        super().__init__(
            f"The job is {status} and cannot be cancelled.",
            details={"status": status, "job_id": job_id},
        )
        self.status = status


class ConversationBusy(DomainError):
    """A chat asked ``on_busy: reject`` of a conversation with a chat queued or running."""

    def __init__(self, *, conversation_id: str, job_id: str):
        super().__init__(
            "The conversation has a chat queued or running; nothing was stored.",
            details={"conversation_id": conversation_id, "job_id": job_id},
        )


# --- Integrations --------------------------------------------------------------------------


class IdempotencyKeyReused(DomainError):
    def __init__(self, key: str):
        super().__init__(
            "This Idempotency-Key was used with another request (method, path or body).",
            details={"idempotency_key": key},
        )


class IdempotencyInProgress(DomainError):
    retry_after = 1

    def __init__(self, key: str):
        super().__init__(
            "A request with this Idempotency-Key is still being handled; try again.",
            details={"idempotency_key": key, "retry_after": self.retry_after},
        )


class InvalidWebhookUrl(DomainError):
    def __init__(self, url: str, reason: str):
        super().__init__(f"The webhook URL cannot be used: {reason}", details={"webhook": url})


class JobFailed(DomainError):
    """A job this request waited for failed (its error in ``details``)."""

    def __init__(self, *, job_id: str, error: str):
        super().__init__(
            f"The agent's job failed: {error}", details={"job_id": job_id, "job_error": error}
        )


class JobCancelled(DomainError):
    """A job this request waited for was cancelled."""

    def __init__(self, *, job_id: str):
        super().__init__("The agent's job was cancelled.", details={"job_id": job_id})


# --- The model runtime ---------------------------------------------------------------------


class RuntimeFailure(DomainError):
    """Base of what can go wrong when calling a model runtime."""

    default_message = "The model runtime answered with an error."


class RuntimeUnavailable(RuntimeFailure):
    default_message = "The model runtime cannot be reached."


class RuntimeAnswerError(RuntimeFailure):
    """The runtime answered an error (or something unreadable)."""


class RuntimeBusy(RuntimeFailure):
    default_message = "The model runtime is busy; try again."


class RuntimeTimeout(RuntimeFailure):
    default_message = "The model runtime did not answer in time."


class RuntimeRejected(RuntimeFailure):
    """The runtime refused the request as invalid (a 4xx other than an unknown model)."""

    default_message = "The model runtime refused the request."


class ContextLengthExceeded(RuntimeFailure):
    """The prompt (with the answer's room) does not fit the model's context."""

    default_message = "The prompt is longer than the model's context."


class UnknownModel(RuntimeFailure):
    def __init__(self, model: str, *, details: dict[str, Any] | None = None):
        super().__init__(
            f"The runtime does not know the model {model!r}.",
            details={"model": model, **(details or {})},
        )


# --- Health --------------------------------------------------------------------------------


class DatabaseUnavailable(DomainError):
    default_message = "The database cannot be reached just now; try again in a moment."
    retry_after = 2

    def __init__(self) -> None:
        super().__init__(details={"retry_after": self.retry_after})


class NotReady(DomainError):
    default_message = "A dependency is not available."


class ServerBusy(DomainError):
    """A web process holds as many connections as it accepts (``GUNICORN_WORKER_CONNECTIONS``)."""

    default_message = "The server is at its limit of connections; try again shortly."


class RequestTimeout(DomainError):
    """A client sent its request's headers or body too slowly (``WEB_HEADER_TIMEOUT``,
    ``WEB_BODY_TIMEOUT``)."""

    default_message = "The request was not received in time; the connection is closed."


class TooManyConnections(DomainError):
    """A client address holds as many connections to a web process as it may."""

    default_message = "Too many connections from this address; close some and try again."
    retry_after = 1
