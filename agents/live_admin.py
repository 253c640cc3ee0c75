"""A job's event stream for its admin page, read under the staff session (``live.js``
follows it): the API's stream takes keys, which a browser page does not hold."""

from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.db.models import Max
from django.http import HttpRequest, StreamingHttpResponse

from agents import eventbus
from agents.event_models import JobEvent
from agents.event_views import last_event_id, sse_event, sse_lines
from agents.models import Job

# What a stream that ends at once (WSGI) tells EventSource: reconnect after a second.
RETRY = b"retry: 1000\n\n"


def last_seq(job: Job) -> int:
    """The number of the job's last event (0 before the first)."""
    return JobEvent.objects.filter(job=job).aggregate(last=Max("seq"))["last"] or 0


def _rows(job_id: str, after: int) -> list[tuple[int, str, dict]]:
    rows = JobEvent.objects.filter(job_id=job_id, seq__gt=after).order_by("seq")
    return list(rows.values_list("seq", "type", "data")[: eventbus.READ_BATCH])


def job_stream(request: HttpRequest, job: Job) -> StreamingHttpResponse:
    """The job's events after the page's (or the reconnecting ``EventSource``'s) last id."""
    after = last_event_id(request)
    if isinstance(request, WSGIRequest):
        # A server without a lasting event loop (Django's development server): what is
        # stored, then the end; ``EventSource`` reconnects after ``retry`` milliseconds and
        # goes on after the last id it received.
        body = [RETRY, *(sse_event(*row) for row in _rows(job.pk, after))]
    else:
        items = eventbus.job_events(
            job.pk, after=after, keepalive=settings.EVENTS_KEEPALIVE_SECONDS
        )
        body = sse_lines(items)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
