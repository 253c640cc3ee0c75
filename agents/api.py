"""The base view of the agent API (``/agent/...``), shared by jobs and conversations."""

from django.http import HttpRequest, HttpResponseBase
from rest_framework.request import Request
from rest_framework.views import APIView

from core.db import RUNS, run_again_if_dropped, was_dropped
from gateway.authentication import ApiKeyAuthentication, HasAgentScope
from gateway.ratelimit import AgentRateLimit


class AgentAPIView(APIView):
    """Base of the /agent/... views: key auth with the agent scope, the key's agent API
    rate limits, JSON bodies. A request whose database connection the server dropped runs
    once more on a new one (``core.db``): its reads are safe to repeat, and its writes are
    services that settle a commit cut on the way themselves."""

    authentication_classes = (ApiKeyAuthentication,)
    permission_classes = (HasAgentScope,)
    throttle_classes = (AgentRateLimit,)

    def initial(self, request: Request, *args, **kwargs) -> None:
        # A wrong method is 405 whoever asks: check it before the key.
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            self.http_method_not_allowed(request)
        super().initial(request, *args, **kwargs)

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        request.body  # read now, so that a second run reads it too  # noqa: B018
        runs_left = iter(range(RUNS - 1, -1, -1))

        def run() -> HttpResponseBase:
            self.runs_left = next(runs_left)
            return super(AgentAPIView, self).dispatch(request, *args, **kwargs)

        return run_again_if_dropped(run)

    def handle_exception(self, exc: Exception):
        if self.runs_left and was_dropped(exc):
            raise exc  # to dispatch's next run
        return super().handle_exception(exc)
