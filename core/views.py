"""The base view of the agent API (``/agent/...``), shared by jobs and conversations, and
the site's front page."""

from typing import Any

from django.conf import settings
from django.views.generic import TemplateView
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from core.serializers import ErrorResponseSerializer
from gateway.authentication import ApiKeyAuthentication, HasAgentScope
from gateway.ratelimit import AgentRateLimit


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    texts = {
        400: "invalid_json, validation_error or unknown_profile",
        401: "invalid_api_key",
        403: "forbidden (the key lacks the agent scope)",
        404: "job_not_found / conversation_not_found",
        405: "method_not_allowed",
        409: "job_not_cancellable (details.status)",
        413: "payload_too_large",
        415: "unsupported_media_type",
    }
    return {c: OpenApiResponse(ErrorResponseSerializer, description=texts[c]) for c in codes}


class AgentAPIView(APIView):
    """Base of the /agent/... views: key auth with the agent scope, the key's agent API
    rate limits, JSON bodies."""

    authentication_classes = (ApiKeyAuthentication,)
    permission_classes = (HasAgentScope,)
    throttle_classes = (AgentRateLimit,)

    def initial(self, request: Request, *args, **kwargs) -> None:
        # A wrong method is 405 whoever asks: check it before the key.
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            self.http_method_not_allowed(request)
        super().initial(request, *args, **kwargs)


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
