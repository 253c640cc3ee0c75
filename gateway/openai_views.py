"""The OpenAI-compatible face: ``/v1/models``, ``/v1/chat/completions``,
``/v1/completions`` and ``/v1/embeddings``, over the same keys, routing, limits and usage
records as ``/api.php`` (``gateway.services``), served asynchronously the same way.

Calls are stateless: the messages or the prompt reach the runtime as sent, nothing is
stored but the usage row. Streams are server-sent events, one chunk per piece the runtime
sends; a client that goes away cancels the view, which closes the runtime call. Errors
answer OpenAI's shape (``core.errors.openai_answer``). Agents as models
(``agent/<profile>``) are added by ``conversations.openai_views``, above this layer.
"""

import time
import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.views import APIView

from core.errors import openai_answer
from core.exceptions import NotFound
from core.http import read_json_object
from gateway import embeddings, openai_wire, runtime, services
from gateway.dbthread import in_thread
from gateway.models import ApiKey, Scope, UsageRecord
from gateway.openai_serializers import (
    ChatCompletionRequestSerializer,
    ChatCompletionSerializer,
    CompletionRequestSerializer,
    CompletionSerializer,
    EmbeddingListSerializer,
    EmbeddingRequestSerializer,
    OpenAIErrorSerializer,
    OpenAIModelListSerializer,
    OpenAIStreamEventSerializer,
)
from gateway.openai_sse import chat_events, completion_events, event_stream, first_of
from gateway.routing import default_endpoint, routes
from gateway.views import render

TAG = "OpenAI-compatible"
OPENAI = UsageRecord.Origin.OPENAI


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    return {status: OpenApiResponse(OpenAIErrorSerializer) for status in statuses}


CALL_ERRORS = errors(400, 401, 403, 404, 409, 429, 502, 503, 504)
STREAM = OpenApiResponse(
    OpenAIStreamEventSerializer,
    description="With `stream`: server-sent events, `data: {chunk}` lines, `data: [DONE]` last.",
)


def bearer_key(request: HttpRequest) -> str:
    """The key of ``Authorization: Bearer <key>`` ("" when there is none)."""
    scheme, _, plain = request.headers.get("Authorization", "").partition(" ")
    return plain.strip() if scheme.lower() == "bearer" else ""


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def json_answer(data: dict[str, Any]) -> HttpResponse:
    return render(data)


class OpenAIView(APIView):
    """An async view of the face: DRF's class for the schema, an async dispatch (as
    ``/api.php``'s), every error in OpenAI's shape."""

    http_method_names = ["post"]
    parser_classes: list = []
    authentication_classes: list = []
    permission_classes: list = []

    async def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.args, self.kwargs, self.request = args, kwargs, request
        try:
            method = (request.method or "").lower()
            if method not in self.http_method_names:
                raise MethodNotAllowed(request.method)
            return await getattr(self, method)(request, *args, **kwargs)
        except Exception as exc:
            status, body, headers = openai_answer(exc)
            response = render(body, status=status)
            for name, value in headers.items():
                response[name] = value
            if isinstance(exc, MethodNotAllowed):
                response["Allow"] = ", ".join(m.upper() for m in self.http_method_names)
            return response


def _admit_chat(plain: str, data: Any) -> tuple[services.AdmittedCall, dict[str, Any]]:
    api_key = services.api_key_authenticate(plain)
    fields = validated(ChatCompletionRequestSerializer, data)
    call = services.model_call_admit(
        api_key=api_key,
        model=fields["model"],
        options=openai_wire.options_from(fields),
        origin=OPENAI,
        messages=openai_wire.runtime_messages(fields["messages"]),
        response_format=fields.get("response_format"),
    )
    return call, fields


def include_usage(fields: dict[str, Any]) -> bool:
    return bool((fields.get("stream_options") or {}).get("include_usage"))


class ChatCompletionsView(OpenAIView):
    @extend_schema(
        operation_id="openai_chat_completions",
        tags=[TAG],
        request={"application/json": ChatCompletionRequestSerializer},
        responses={
            (200, "application/json"): ChatCompletionSerializer,
            (200, "text/event-stream"): STREAM,
            **CALL_ERRORS,
        },
        description=(
            "OpenAI's chat completions over the runtime's chat path (Ollama `/api/chat` or "
            "`/v1/chat/completions`), stateless: the messages are sent as received and "
            "nothing but the usage row is stored. `n` must be 1. With `stream`, server-sent "
            "events (`data: {chunk}` ... `data: [DONE]`), the usage chunk last when "
            "`stream_options.include_usage`. `agent/<profile>` models run the agent: see "
            "docs/openai.md (only the last `user` message is read; the agent keeps the history)."
        ),
    )
    async def post(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        return await self.complete(bearer_key(request), read_json_object(request), started)

    async def complete(self, plain: str, data: dict[str, Any], started: float) -> HttpResponse:
        call, fields = await in_thread(_admit_chat, plain, data)
        answer_id, created = new_id("chatcmpl"), int(time.time())
        if fields["stream"]:
            pieces = services.model_call_stream(call, started=started)
            first = await first_of(pieces)
            return await event_stream(
                self.request,
                chat_events(
                    first,
                    pieces,
                    id=answer_id,
                    created=created,
                    model=call.model,
                    with_usage=include_usage(fields),
                ),
            )
        result = await services.model_call_async(call, started=started)
        return json_answer(
            openai_wire.chat_completion(
                id=answer_id,
                created=created,
                model=call.model,
                text=result.response,
                finish_reason=result.finish_reason,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
            )
        )


def _admit_completion(plain: str, data: Any) -> tuple[services.AdmittedCall, dict[str, Any]]:
    api_key = services.api_key_authenticate(plain)
    fields = validated(CompletionRequestSerializer, data)
    call = services.model_call_admit(
        api_key=api_key,
        model=fields["model"],
        prompt=fields["prompt"][0],
        options=openai_wire.options_from(fields),
        origin=OPENAI,
    )
    return call, fields


class CompletionsView(OpenAIView):
    @extend_schema(
        operation_id="openai_completions",
        tags=[TAG],
        request={"application/json": CompletionRequestSerializer},
        responses={
            (200, "application/json"): CompletionSerializer,
            (200, "text/event-stream"): STREAM,
            **CALL_ERRORS,
        },
        description=(
            "OpenAI's (legacy) completions: the raw prompt path of the runtime (Ollama "
            "`/api/generate` or `/v1/completions`), for base models. One prompt, `n` = 1; "
            "`stream` as in chat completions."
        ),
    )
    async def post(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        data = read_json_object(request)
        call, fields = await in_thread(_admit_completion, bearer_key(request), data)
        common = {"id": new_id("cmpl"), "created": int(time.time()), "model": call.model}
        if fields["stream"]:
            pieces = services.model_call_stream(call, started=started)
            first = await first_of(pieces)
            return await event_stream(
                self.request,
                completion_events(first, pieces, **common, with_usage=include_usage(fields)),
            )
        result = await services.model_call_async(call, started=started)
        return json_answer(
            openai_wire.text_completion(
                **common,
                text=result.response,
                finish_reason=result.finish_reason,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
            )
        )


def _embedding_fields(plain: str, data: Any) -> tuple[ApiKey, dict[str, Any]]:
    api_key = services.api_key_authenticate(plain)
    fields = validated(EmbeddingRequestSerializer, data)
    size = embeddings.dimension(fields["model"])
    wanted = fields.get("dimensions")
    if wanted is not None and size is not None and wanted != size:
        raise serializers.ValidationError(
            {"dimensions": [f"This model's vectors have {size} dimensions; it cannot change."]}
        )
    return api_key, fields


class EmbeddingsView(OpenAIView):
    @extend_schema(
        operation_id="openai_embeddings",
        tags=[TAG],
        request={"application/json": EmbeddingRequestSerializer},
        responses={200: EmbeddingListSerializer, **CALL_ERRORS},
        description=(
            f"Vectors (L2-normalised) of a string or a list of strings. `{embeddings.LOCAL_MODEL}`"
            " is the in-process embedder (384 dimensions); the runtime's `EMBEDDING_MODEL` too "
            "when `EMBEDDING_BACKEND=runtime`. `dimensions` other than the model's: 400."
        ),
    )
    async def post(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        data = read_json_object(request)
        api_key, fields = await in_thread(_embedding_fields, bearer_key(request), data)
        vectors, tokens = await services.embedding_call_async(
            api_key=api_key, model=fields["model"], texts=fields["input"], started=started
        )
        wanted = fields.get("dimensions")
        if wanted is not None and wanted != vectors.shape[1]:
            raise serializers.ValidationError(
                {"dimensions": [f"This model's vectors have {vectors.shape[1]} dimensions."]}
            )
        return json_answer(
            openai_wire.embedding_list(
                model=fields["model"],
                vectors=vectors.tolist(),
                prompt_tokens=tokens,
                base64_floats=fields["encoding_format"] == "base64",
            )
        )


def _model_key(plain: str) -> ApiKey:
    api_key = services.api_key_authenticate(plain)
    if Scope.MODEL not in api_key.scopes and Scope.AGENT not in api_key.scopes:
        services.api_key_require_scope(api_key, Scope.MODEL)
    return api_key


async def runtime_models(api_key: ApiKey) -> list[tuple[str, str]]:
    """``(id, owned_by)`` of the models this key may call through the runtimes: the routed
    ones and those the default runtime lists, then the embedding models; within the key's
    allow-list. None without the ``model`` scope."""
    if Scope.MODEL not in api_key.scopes:
        return []
    table = await in_thread(routes)
    found = {name: endpoints[0].name for name, endpoints in table.items()}
    default = default_endpoint()
    for name in await runtime.served(default):
        found.setdefault(name, default.name)
    for name in embeddings.served_models():
        found.setdefault(name, "embeddings")
    allowed = set(api_key.allowed_models or [])
    return sorted((n, owner) for n, owner in found.items() if not allowed or n in allowed)


class ModelsView(OpenAIView):
    http_method_names = ["get"]

    @extend_schema(
        operation_id="openai_models",
        tags=[TAG],
        responses={200: OpenAIModelListSerializer, **errors(401, 403)},
        description=(
            "The models this key may use: the runtimes' (routed, and those the default "
            "runtime lists; within the key's allow-list) and the embedding models with the "
            "`model` scope, one `agent/<profile>` per agent profile with the `agent` scope."
        ),
    )
    async def get(self, request: HttpRequest) -> HttpResponse:
        api_key = await in_thread(_model_key, bearer_key(request))
        models = await self.models(api_key)
        return json_answer(openai_wire.model_list(models, created=int(time.time())))

    async def models(self, api_key: ApiKey) -> list[tuple[str, str]]:
        return await runtime_models(api_key)


@csrf_exempt
async def not_found(request: HttpRequest) -> HttpResponse:
    """Any other path under ``/v1/``: OpenAI's 404."""
    status, body, _ = openai_answer(NotFound(f"No endpoint at {request.path}."))
    return render(body, status=status)
