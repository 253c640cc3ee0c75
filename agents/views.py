from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents import selectors, services, webhooks
from agents.api import AgentAPIView
from agents.examples import (
    JOB_CANCEL,
    JOB_START,
    JOB_STATUS,
    WEBHOOK_SECRET,
    WEBHOOK_SECRET_ROTATE,
)
from agents.idempotency import Done, respond
from agents.serializers import (
    JobCancelResponseSerializer,
    JobStartRequestSerializer,
    JobStartResponseSerializer,
    JobStatusResponseSerializer,
    WebhookSecretResponseSerializer,
)
from core.schema import (
    AGENT_KEY,
    ANY_ENDPOINT,
    IDEMPOTENCY_KEY,
    IDEMPOTENT,
    JOB_START_ERRORS,
    error_responses,
)


class JobStartView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        operation_id="job_start",
        request=JobStartRequestSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={
            200: JobStartResponseSerializer,
            **error_responses("JobStart", JOB_START_ERRORS),
        },
        description="Starts a task job. Answers once the job is committed and enqueued.",
        examples=JOB_START,
    )
    def post(self, request: Request) -> HttpResponse:
        return respond(request, lambda: self.start(request))

    def start(self, request: Request) -> Done:
        serializer = JobStartRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = services.task_start(
            api_key=request.auth,
            task=serializer.validated_data["task"],
            **serializer.start_arguments(),
        )
        return Done(Response(JobStartResponseSerializer(job).data), job_id=job.pk)


class JobDetailView(AgentAPIView):
    http_method_names = ["get"]

    @extend_schema(
        operation_id="job_status",
        responses={
            200: JobStatusResponseSerializer,
            **error_responses("JobDetail", ANY_ENDPOINT, AGENT_KEY, {404: ("job_not_found",)}),
        },
        examples=JOB_STATUS,
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = selectors.job_get_for_owner(job_id=job_id, owner_id=request.auth.owner_id)
        return Response(JobStatusResponseSerializer(job).data)


class JobCancelView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        operation_id="job_cancel",
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={
            200: JobCancelResponseSerializer,
            **error_responses(
                "JobCancel",
                ANY_ENDPOINT,
                AGENT_KEY,
                IDEMPOTENT,
                {404: ("job_not_found",), 409: ("job_not_cancellable",)},
            ),
        },
        description=(
            "queued -> cancelled at once; running -> cancelling, then cancelled when the "
            "worker stops (between steps and while the model generates). Idempotent for "
            "cancelling/cancelled jobs; 409 job_not_cancellable (with `details.status`) for "
            "finished/failed ones."
        ),
        examples=JOB_CANCEL,
    )
    def post(self, request: Request, job_id: str) -> HttpResponse:
        return respond(request, lambda: self.cancel(request, job_id))

    def cancel(self, request: Request, job_id: str) -> Done:
        job = selectors.job_get_for_owner(job_id=job_id, owner_id=request.auth.owner_id)
        status = services.job_cancel(job)
        data = JobCancelResponseSerializer({"job_id": job.pk, "status": status}).data
        return Done(Response(data))


class WebhookSecretView(AgentAPIView):
    http_method_names = ["get"]

    @extend_schema(
        operation_id="webhook_secret",
        examples=WEBHOOK_SECRET,
        responses={
            200: WebhookSecretResponseSerializer,
            **error_responses("WebhookSecret", ANY_ENDPOINT, AGENT_KEY),
        },
        description=(
            "The key owner's webhook signing secret (`whsec_` + base64), created on first "
            "use. Webhooks carry `webhook-id`, `webhook-timestamp` and `webhook-signature` "
            "(Standard Webhooks): verify them with any Standard Webhooks library."
        ),
    )
    def get(self, request: Request) -> Response:
        row = webhooks.secret_get(owner_id=request.auth.owner_id)
        return Response(WebhookSecretResponseSerializer(webhooks.secret_view(row)).data)


class WebhookSecretRotateView(AgentAPIView):
    http_method_names = ["post"]

    @extend_schema(
        operation_id="webhook_secret_rotate",
        examples=WEBHOOK_SECRET_ROTATE,
        request=None,
        responses={
            200: WebhookSecretResponseSerializer,
            **error_responses("WebhookSecretRotate", ANY_ENDPOINT, AGENT_KEY),
        },
        description=(
            "A new signing secret. For 24 h the previous one signs too: `webhook-signature` "
            "then carries both signatures, space-separated."
        ),
    )
    def post(self, request: Request) -> Response:
        row = webhooks.secret_rotate(owner_id=request.auth.owner_id)
        return Response(WebhookSecretResponseSerializer(webhooks.secret_view(row)).data)
