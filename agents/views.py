from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors, services
from agents.models import JobKind
from agents.serializers import (
    JobStartRequestSerializer,
    JobStartResponseSerializer,
    JobStatusResponseSerializer,
)
from gateway.authentication import ApiKeyAuthentication, HasAgentScope
from gateway.serializers import ErrorResponseSerializer


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
    """Base of the /agent/... views: key auth with the agent scope, JSON bodies."""

    authentication_classes = (ApiKeyAuthentication,)
    permission_classes = (HasAgentScope,)

    def initial(self, request: Request, *args, **kwargs) -> None:
        # A wrong method is 405 whoever asks: check it before the key.
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            self.http_method_not_allowed(request)
        super().initial(request, *args, **kwargs)


class JobStartView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        request=JobStartRequestSerializer,
        responses={
            200: JobStartResponseSerializer,
            **error_responses(400, 401, 403, 405, 413, 415),
        },
        description="Starts a task job. Answers once the job is committed and enqueued.",
    )
    def post(self, request: Request) -> Response:
        serializer = JobStartRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = serializer.validated_data
        profile = selectors.profile_get(fields.get("profile"))
        with transaction.atomic():
            job = services.job_create(
                api_key=request.auth,
                kind=JobKind.TASK,
                source=fields["source"],
                scope_type=fields["scope_type"],
                scope_id=fields["scope_id"],
                task=fields["task"],
                profile=profile,
            )
        return Response({"ok": True, "data": {"job_id": job.pk, "status": job.status}})


class JobDetailView(AgentAPIView):
    http_method_names = ["get"]

    @extend_schema(
        responses={200: JobStatusResponseSerializer, **error_responses(401, 403, 404, 405)}
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = selectors.job_get_for_owner(job_id=job_id, owner_id=request.auth.owner_id)
        return Response({"ok": True, "data": selectors.job_view(job)})


class JobCancelView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        request=None,
        responses={200: JobStartResponseSerializer, **error_responses(401, 403, 404, 405, 409)},
        description=(
            "queued -> cancelled at once; running -> cancelling, then cancelled when the "
            "worker stops (between steps and while the model generates). Idempotent for "
            "cancelling/cancelled jobs; 409 job_not_cancellable for finished/failed ones."
        ),
    )
    def post(self, request: Request, job_id: str) -> Response:
        job = selectors.job_get_for_owner(job_id=job_id, owner_id=request.auth.owner_id)
        status = services.job_cancel(job)
        return Response({"ok": True, "data": {"job_id": job.pk, "status": status}})
