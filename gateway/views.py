import time
from typing import Any

from django.http import HttpRequest, HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import to_answer
from core.exceptions import NotReady
from core.http import read_json_object
from core.schema import ANY_ENDPOINT, error_responses
from gateway import health, services
from gateway.dbthread import in_thread
from gateway.examples import HEALTH, MODEL_CALL, READY
from gateway.serializers import (
    HealthResponseSerializer,
    LLMRequestSerializer,
    LLMSuccessResponseSerializer,
    ReadyResponseSerializer,
)

MODEL_CALL_ERRORS: dict[int, tuple[str, ...]] = {
    400: (
        "invalid_json",
        "validation_error",
        "unknown_model",
        "runtime_rejected",
        "context_length_exceeded",
    ),
    401: ("invalid_api_key",),
    403: ("forbidden", "model_not_allowed"),
    429: ("rate_limited", "budget_exceeded"),
    502: ("runtime_unavailable", "runtime_error"),
    503: ("runtime_busy",),
    504: ("runtime_timeout",),
}


class AsyncAPIView(APIView):
    """A DRF view (its class, for the schema) whose one method is served asynchronously:
    DRF's dispatch is synchronous, so this one replaces it. Errors become the envelope
    through the same mapping as everywhere else (``core.errors``), rendered as DRF's JSON
    renderer does; a method other than the view's one is 405 with ``Allow``."""

    async def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.args, self.kwargs, self.request = args, kwargs, request
        (allowed,) = self.http_method_names
        try:
            if request.method.lower() != allowed:
                raise MethodNotAllowed(request.method)
            return await getattr(self, allowed)(request, *args, **kwargs)
        except Exception as exc:
            answer = to_answer(exc)
            response = render(answer.body(), status=answer.status)
            for name, value in answer.headers.items():
                response[name] = value
            if isinstance(exc, MethodNotAllowed):
                response["Allow"] = allowed.upper()
            return response


class ModelCallView(AsyncAPIView):
    """``POST /api.php``: the stateless model endpoint, served asynchronously.

    Checks, in order: body (400 invalid_json), key (401), fields (400 validation_error),
    scope and model permission (403), rate limit (429); then forwards exactly ``prompt``.

    Asynchronous, so that a process holds hundreds of calls in flight: the database work
    runs in the request's thread and gives its connection back before the model is awaited
    (``gateway.dbthread``), and a client that goes away cancels the call.
    """

    http_method_names = ["post"]
    parser_classes: list = []

    @extend_schema(
        operation_id="model_call",
        # Named explicitly: the view reads the body itself (no DRF parsers to infer it from).
        request={"application/json": LLMRequestSerializer},
        responses={
            200: LLMSuccessResponseSerializer,
            **error_responses("ModelCall", ANY_ENDPOINT, MODEL_CALL_ERRORS),
        },
        description=(
            "Forwards exactly `prompt` (no history, none stored) with `model` and `options` "
            "to the model runtime. `options` use Ollama's names (`temperature`, `top_p`, "
            "`top_k`, `seed`, `num_predict`, `num_ctx`, `stop`, ...) and are mapped for "
            "OpenAI-compatible runtimes. `elapsed` is wall-clock seconds from the request "
            "entering the view to the answer being ready."
        ),
        examples=MODEL_CALL,
    )
    async def post(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        data = read_json_object(request)
        call = await in_thread(self.admit, data)
        result = await services.model_call_async(call, started=started)
        return render(_ANSWER.to_representation(result))

    @staticmethod
    def admit(data: dict[str, Any]) -> services.AdmittedCall:
        """Key, fields, then the checks before the model: every statement of the call
        before it waits on the model, in one trip to a thread."""
        api_key = services.api_key_authenticate(data.get("api_key"))
        serializer = LLMRequestSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        return services.model_call_admit(
            api_key=api_key,
            model=fields["model"],
            prompt=fields["prompt"],
            options=fields.get("options"),
        )


_renderer = JSONRenderer()
# One instance for every answer: its fields are built (deep-copied from the class's) once,
# not per call; ``to_representation`` only reads them.
_ANSWER = LLMSuccessResponseSerializer()


def render(data: Any, *, status: int = 200) -> HttpResponse:
    """``data`` as the bytes DRF's JSON renderer sends, outside DRF's (synchronous) dispatch."""
    return HttpResponse(_renderer.render(data), status=status, content_type="application/json")


class HealthView(APIView):
    """``GET /healthz``: the process is alive (``HEAD`` too, for probes that send it)."""

    http_method_names = ["get", "head"]

    @extend_schema(
        operation_id="healthz",
        responses={200: HealthResponseSerializer, **error_responses("Health", ANY_ENDPOINT)},
        examples=HEALTH,
    )
    def get(self, request: Request) -> Response:
        return Response(HealthResponseSerializer({"status": "alive"}).data)


class ReadyView(APIView):
    """``GET /readyz`` (``HEAD`` too): the database answers and every configured runtime is up
    (within a second, whatever the runtimes are doing: see ``gateway.health``)."""

    http_method_names = ["get", "head"]

    @extend_schema(
        operation_id="readyz",
        responses={
            200: ReadyResponseSerializer,
            **error_responses("Ready", ANY_ENDPOINT, {503: ("not_ready",)}),
        },
        examples=READY,
    )
    def get(self, request: Request) -> Response:
        checks = health.readiness()
        if all(state in health.UP for state in checks.values()):
            return Response(ReadyResponseSerializer({"status": "ready", "checks": checks}).data)
        raise NotReady(details={"checks": checks})
