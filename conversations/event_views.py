"""``GET /agent/conversation/{id}/events``: a conversation's event stream (server-sent
events), and the same stream for the admin's live transcript under the staff session.

Served as the job's stream is (``agents.event_views``): refusals are the envelope, the key
and the conversation are read in the bus's threads, then the stream waits on the event loop.
"""

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema

from agents import eventbus
from agents.event_views import (
    LAST_EVENT_ID,
    LAST_EVENT_ID_QUERY,
    StreamView,
    key_for_request,
    last_event_id,
    sse_event,
)
from agents.live_admin import RETRY
from conversations import events, selectors
from conversations.event_serializers import ConversationStreamEventSerializer
from conversations.examples import CONVERSATION_EVENTS
from core.schema import AGENT_KEY, ANY_ENDPOINT, error_responses
from gateway.openai_sse import event_stream


def resume_after(request: HttpRequest, conversation_id: str) -> int:
    """Where the client's stream starts: after its ``Last-Event-ID`` (or
    ``?last_event_id=``), else after the conversation's last event (what is stored from
    now on). A bad id is :class:`InvalidInput`."""
    if "Last-Event-ID" in request.headers or "last_event_id" in request.GET:
        return last_event_id(request)
    return events.last_seq(conversation_id)


def stream_body(request: HttpRequest, conversation_id: str, after: int):
    """A lasting stream on the event loop, or what is stored so far under WSGI (Django's test
    server): an ``EventSource`` then reconnects and goes on."""
    if isinstance(request, WSGIRequest):
        return events.stored(conversation_id, after)
    return events.stream(conversation_id, after)


def staff_stream(request: HttpRequest, conversation_id: str) -> StreamingHttpResponse:
    """The stream for a staff page (the admin checked the session and the permission)."""
    after = resume_after(request, conversation_id)
    if isinstance(request, WSGIRequest):  # the admin's view is synchronous: read it here
        rows = events.events_after(conversation_id, after)
        body = [RETRY, *(sse_event(*row) for row in rows)]
    else:
        body = events.stream(conversation_id, after)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _admit(request: HttpRequest, conversation_id: str) -> tuple[str, int]:
    api_key = key_for_request(request)
    conversation = selectors.conversation_get_for_owner(
        conversation_id=conversation_id, owner_id=api_key.owner_id
    )
    return conversation.pk, resume_after(request, conversation.pk)


class ConversationEventsView(StreamView):
    @extend_schema(
        operation_id="conversation_events",
        parameters=[LAST_EVENT_ID, LAST_EVENT_ID_QUERY],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                ConversationStreamEventSerializer,
                description=(
                    "Server-sent events: each has `id:` (a positive integer, strictly "
                    "increasing within the conversation), `event:` (`message`, `token` or "
                    "`discard`) and "
                    "one JSON `data:` line. `: keep-alive` comments every 15 s while nothing "
                    "happens. The stream stays open until the client closes it."
                ),
            ),
            **error_responses(
                "ConversationEvents",
                ANY_ENDPOINT,
                AGENT_KEY,
                {400: ("validation_error",), 404: ("conversation_not_found",)},
            ),
        },
        description=(
            "A chat window's one stream: `message` for every message stored in the "
            "conversation (`role`, `content`, `created_at`, `seq`, as GET "
            "/agent/conversation/{id} shows it), and `token` while a chat job of the "
            "conversation generates its reply (`step`: the index of its model call in the "
            "job, `text`: the next piece), and `discard` when the text of such a step is not "
            "kept (`step`, `reason`: a client takes that step's text back; a later step "
            "writes the reply, or the chat ended without one). What is left of the pieces is "
            "the stored reply. The order is the conversation's. Without `Last-Event-ID` the "
            "stream starts with what is stored after it opened; with it, exactly the events "
            "after that id (`0`: from the first)."
        ),
        examples=CONVERSATION_EVENTS,
    )
    async def get(self, request: HttpRequest, conversation_id: str) -> HttpResponse:
        wsgi = isinstance(request, WSGIRequest)
        found, after = await eventbus.db(_admit, request, conversation_id, inline=wsgi)
        return await event_stream(request, stream_body(request, found, after))
