"""The site's front page, and ``GET /metrics``."""

import hmac
import ipaddress
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import TemplateView
from prometheus_client import CONTENT_TYPE_LATEST

from core import metrics
from core.errors import ErrorAnswer, json_error
from core.exceptions import Forbidden, InvalidApiKey


class IndexView(TemplateView):
    """``GET /``: a page linking the API docs, the admin and the health endpoints (also
    where the admin's "View site" lands)."""

    template_name = "index.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            "title": settings.SPECTACULAR_SETTINGS["TITLE"],
            "version": settings.SPECTACULAR_SETTINGS["VERSION"],
        }


def _may_read_metrics(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if token:
        offered = request.META.get("HTTP_AUTHORIZATION", "")
        return hmac.compare_digest(offered.encode(), f"Bearer {token}".encode())
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in settings.METRICS_NETWORKS)


@csrf_exempt
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: every process's metrics in the Prometheus text format
    (``core.metrics``). With ``METRICS_TOKEN`` the bearer token is required (401); without,
    the client's address must be in ``METRICS_ALLOWED_NETWORKS`` (403) — the socket's
    address: behind a proxy, set a token."""
    if request.method not in ("GET", "HEAD"):
        response = json_error(ErrorAnswer(405, "method_not_allowed", "Only GET is allowed."))
        response["Allow"] = "GET, HEAD"
        return response
    if not _may_read_metrics(request):
        if settings.METRICS_TOKEN:
            response = json_error(InvalidApiKey("A valid metrics token is required."))
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return json_error(Forbidden("Metrics may be read from the allowed networks only."))
    body = metrics.exposition(str(settings.METRICS_DIR))
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
