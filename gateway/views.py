import time

from django.db import connection
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway import runtime, services
from gateway.errors import ApiError
from gateway.http import read_json_object
from gateway.serializers import (
    ErrorResponseSerializer,
    LLMRequestSerializer,
    LLMSuccessResponseSerializer,
)

_ERRORS = {
    code: OpenApiResponse(ErrorResponseSerializer, description=text)
    for code, text in {
        400: "invalid_json, validation_error or unknown_model",
        401: "invalid_api_key",
        403: "forbidden (key lacks the model scope) or model_not_allowed",
        405: "method_not_allowed (Allow: POST)",
        413: "payload_too_large",
        429: "rate_limited (Retry-After)",
        502: "runtime_unavailable or runtime_error",
        503: "runtime_busy",
        504: "runtime_timeout",
    }.items()
}


class ModelCallView(APIView):
    """``POST /api.php``: the stateless model endpoint.

    Checks, in order: body (400 invalid_json), key (401), fields (400 validation_error),
    scope and model permission (403), rate limit (429); then forwards exactly ``prompt``.
    """

    http_method_names = ["post"]
    parser_classes: list = []

    @extend_schema(
        # Named explicitly: the view reads the body itself (no DRF parsers to infer it from).
        request={"application/json": LLMRequestSerializer},
        responses={200: LLMSuccessResponseSerializer, **_ERRORS},
        description=(
            "Forwards exactly `prompt` (no history, none stored) with `model` and `options` "
            "to the model runtime. `options` use Ollama's names (`temperature`, `top_p`, "
            "`top_k`, `seed`, `num_predict`, `num_ctx`, `stop`, ...) and are mapped for "
            "OpenAI-compatible runtimes. `elapsed` is wall-clock seconds from the request "
            "entering the view to the answer being ready."
        ),
    )
    def post(self, request: Request) -> Response:
        started = time.perf_counter()
        data = read_json_object(request)
        api_key = services.api_key_authenticate(data.get("api_key"))
        serializer = LLMRequestSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        result = services.model_call(
            api_key=api_key,
            model=fields["model"],
            prompt=fields["prompt"],
            options=fields.get("options"),
            started=started,
        )
        return Response(
            {
                "ok": True,
                "model": result.model,
                "response": result.response,
                "elapsed": result.elapsed,
                "usage": {
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                },
            }
        )


class HealthView(APIView):
    """``GET /healthz``: the process is alive."""

    http_method_names = ["get"]

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        return Response({"ok": True, "data": {"status": "alive"}})


class ReadyView(APIView):
    """``GET /readyz``: the database and every configured runtime answer."""

    http_method_names = ["get"]

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        checks: dict[str, str] = {}
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            checks["database"] = "ok"
        except Exception as exc:  # any failure means not ready
            checks["database"] = f"error: {exc}"
        for endpoint, _models in runtime.iter_endpoints():
            try:
                runtime.list_models(endpoint)
                checks[f"runtime:{endpoint.name}"] = "ok"
            except ApiError as err:
                checks[f"runtime:{endpoint.name}"] = err.error
        if all(value == "ok" for value in checks.values()):
            return Response({"ok": True, "data": {"status": "ready", "checks": checks}})
        raise ApiError(
            503, "not_ready", "A dependency is not available.", details={"checks": checks}
        )
