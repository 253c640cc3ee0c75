"""``GET /agent/job/{id}/events``: a job's events as server-sent events.

Served on the event loop (an async dispatch, as ``/api.php``'s): the key and the job are
read in the bus's threads (``agents.eventbus.db``), then the stream waits without a thread
or a database connection. Refusals (401, 404, 400 for a bad ``Last-Event-ID``) are the
error envelope; once open, the answer is ``text/event-stream``: ``id:``, ``event:`` and a
JSON ``data:`` line per event, a ``: keep-alive`` comment when nothing happened for
``EVENTS_KEEPALIVE_SECONDS``, closed after the terminal status event.
"""

import json
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from agents import eventbus, selectors
from agents.event_serializers import JobStreamEventSerializer
from agents.examples import JOB_EVENTS
from agents.models import Job
from core.exceptions import InvalidInput
from core.schema import AGENT_KEY, ANY_ENDPOINT, error_responses
from gateway import services
from gateway.authentication import ApiKeyAuthentication
from gateway.models import Scope
from gateway.openai_sse import event_stream
from gateway.ratelimit import Bucket, take_slot
from gateway.views import AsyncAPIView

# A non-negative integer, of 18 digits at most (larger ids are refused like other text).
EVENT_ID = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}
LAST_EVENT_ID = OpenApiParameter(
    "Last-Event-ID",
    EVENT_ID,
    OpenApiParameter.HEADER,
    required=False,
    description="Resume after this event id (what an EventSource sends when it reconnects): "
    "the events after it, then live ones. Beyond the last event: live events only. Not a "
    "non-negative integer: 400 `validation_error`.",
)
LAST_EVENT_ID_QUERY = OpenApiParameter(
    "last_event_id",
    EVENT_ID,
    OpenApiParameter.QUERY,
    required=False,
    description="`Last-Event-ID` for clients that cannot set headers (the header wins).",
)


def sse_event(event_id: int, kind: str, data: dict[str, Any]) -> bytes:
    """One server-sent event: ``id:``, ``event:``, one JSON ``data:`` line, in ASCII (other
    characters as JSON escapes): a client that decodes ``text/event-stream`` with a charset
    of its own choosing (ISO-8859-1, for some HTTP libraries) still reads the same text."""
    text = json.dumps(data, separators=(",", ":"))
    return f"id: {event_id}\nevent: {kind}\ndata: {text}\n\n".encode()


KEEP_ALIVE = b": keep-alive\n\n"


def last_event_id(request: HttpRequest) -> int:
    """The id to resume after: the ``Last-Event-ID`` header, else ``?last_event_id=``, else
    0 (from the first event). :class:`InvalidInput` unless a non-negative integer."""
    if "Last-Event-ID" in request.headers:
        name, raw = "Last-Event-ID", request.headers["Last-Event-ID"]
    elif "last_event_id" in request.GET:
        name, raw = "last_event_id", request.GET["last_event_id"]
    else:
        return 0
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise InvalidInput({name: ["Must be a non-negative integer."]})
    return int(raw)


def key_for_request(request: HttpRequest):
    """The request's key, as the other /agent/ endpoints check it: Bearer or X-API-Key
    (401), the agent scope (403), the key's read limit (429)."""
    _, api_key = ApiKeyAuthentication().authenticate(request)
    services.api_key_require_scope(api_key, Scope.AGENT)
    take_slot(api_key, bucket=Bucket.AGENT_READ, limit=api_key.agent_reads_per_minute)
    return api_key


def _admit(request: HttpRequest, job_id: str) -> Job:
    api_key = key_for_request(request)
    return selectors.job_get_for_owner(job_id=job_id, owner_id=api_key.owner_id)


async def sse_lines(items: AsyncIterator[eventbus.Event | None]) -> AsyncIterator[bytes]:
    """Events as server-sent events; ``None`` (nothing for a while) as a keep-alive."""
    try:
        async for item in items:
            yield KEEP_ALIVE if item is None else sse_event(item.id, item.type, item.data)
    finally:
        await items.aclose()


class StreamView(AsyncAPIView):
    """An async GET whose refusals are the envelope (DRF's class for the schema only)."""

    http_method_names = ["get"]
    authentication_classes = (ApiKeyAuthentication,)  # documents the key in the schema
    permission_classes: list = []


class JobEventsView(StreamView):
    @extend_schema(
        operation_id="job_events",
        parameters=[LAST_EVENT_ID, LAST_EVENT_ID_QUERY],
        examples=JOB_EVENTS,
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                JobStreamEventSerializer,
                description="Server-sent events: each has `id:` (a positive integer, "
                "strictly increasing within the job), `event:` (`status`, `step` or `token`) "
                "and one JSON `data:` line. `: keep-alive` comments every 15 s while nothing "
                "happens. The stream ends after the `status` event of a terminal status.",
            ),
            **error_responses(
                "JobEvents",
                ANY_ENDPOINT,
                AGENT_KEY,
                {400: ("validation_error",), 404: ("job_not_found",)},
            ),
        },
        description=(
            "The job's progress as it happens: `status` on every status change (a terminal "
            "one carries `final_result` or `error` and is the last event), `step` when a "
            "step starts and when it ends (the step as GET /agent/job/{id} shows it; "
            "`attempt` marks a step of a run whose worker died), `token` while a model call "
            "generates (`step`: its index, `text`: the next piece; for a chat's reply the "
            "pieces put together are the stored reply). Without `Last-Event-ID` every event "
            "from the first, then live ones; a finished job's stream replays and closes."
        ),
    )
    async def get(self, request: HttpRequest, job_id: str) -> HttpResponse:
        after = last_event_id(request)
        wsgi = isinstance(request, WSGIRequest)
        job = await eventbus.db(_admit, request, job_id, inline=wsgi)
        items = eventbus.job_events(
            job.pk, after=after, keepalive=settings.EVENTS_KEEPALIVE_SECONDS, poll=wsgi
        )
        return await event_stream(request, sse_lines(items))
