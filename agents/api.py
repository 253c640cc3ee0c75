"""The base view of the agent API (``/agent/...``), shared by jobs and conversations."""

from rest_framework.request import Request
from rest_framework.views import APIView

from gateway.authentication import ApiKeyAuthentication, HasAgentScope
from gateway.ratelimit import AgentRateLimit


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
