"""The outermost middleware: a request id for every request, the HTTP metrics of every
answer (errors made by the rest of the chain included), and the request's span when
traces are on (``core.tracing``).

Synchronous and asynchronous: under ASGI it runs on the event loop and adds no thread.
"""

import functools
import re
import time

from django.http import HttpRequest, HttpResponseBase

from core import metrics, requestid, tracing
from core.http import HybridMiddleware

_CONVERTER = re.compile(r"<(?:[^>:]+:)?([^>]+)>")
_META_HEADER = "HTTP_X_REQUEST_ID"
# Routes whose many URL patterns say nothing to an operator: one label each.
_GROUPED = ("admin/", "static/", "api/")
_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))


def route_of(request: HttpRequest) -> str:
    """The request's URL pattern (``agent/job/{job_id}``), never the raw path; "unmatched"
    when no view of the site took it (404s, and refusals before the URL was resolved)."""
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", None)
    if not route or route.startswith("^"):
        path = request.path_info.lstrip("/")
        for group in _GROUPED:
            if path.startswith(group):
                return group.rstrip("/")
        return "unmatched"
    return _label_of(route)


@functools.lru_cache(maxsize=1024)
def _label_of(route: str) -> str:
    for group in _GROUPED:
        if route.startswith(group):
            return group.rstrip("/")
    return _CONVERTER.sub(r"{\1}", route)


class RequestObserverMiddleware(HybridMiddleware):
    def handle(self, request: HttpRequest) -> HttpResponseBase:
        started, token, span = self.begin(request)
        try:
            if span is None:
                response = self.get_response(request)
            else:
                with tracing.activated(span):
                    response = self.get_response(request)
            return self.end(request, response, started, span)
        finally:
            # Under ASGI (a chain with a synchronous middleware runs this in a thread),
            # the context is copied back to the request's task, whose access log line is
            # written after this returns: the id stays set there, and the task ends with
            # it. Elsewhere (WSGI, the test client) the thread goes on: reset.
            if not hasattr(request, "scope"):
                requestid.request_id.reset(token)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        # The id is left set: the request's task ends with it, and the server's access log
        # line, written when the answer is sent from that task, carries it too.
        started, _, span = self.begin(request)
        if span is None:
            response = await self.get_response(request)
        else:
            with tracing.activated(span, database=False):
                response = await self.get_response(request)
        return self.end(request, response, started, span)

    @staticmethod
    def begin(request: HttpRequest):
        rid = requestid.choose(request.META.get(_META_HEADER))
        request.request_id = rid
        token = requestid.request_id.set(rid)
        span = tracing.start_request_span(request) if tracing.enabled() else None
        return time.perf_counter(), token, span

    @staticmethod
    def end(request, response, started, span) -> HttpResponseBase:
        response[requestid.HEADER] = request.request_id
        route = route_of(request)
        method = request.method if request.method in _METHODS else "other"
        metrics.child(metrics.HTTP_REQUESTS, route, method, str(response.status_code)).inc()
        metrics.child(metrics.HTTP_DURATION, route).observe(time.perf_counter() - started)
        if span is not None:
            tracing.end_request_span(span, route, response.status_code)
        return response
