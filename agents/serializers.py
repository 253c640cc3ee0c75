from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from agents import webhook_client, webhooks
from agents.models import JobKind, JobStatus, StepKind, StepStatus
from agents.selectors import truncate
from core.fields import (
    ConstantField,
    IsoDateTimeField,
    LimitedTextField,
    StrictCharField,
    StringOrIntegerField,
)
from core.serializers import CheckedBodyMixin, RejectUnknownFieldsMixin


class ScopedRequestSerializer(CheckedBodyMixin, RejectUnknownFieldsMixin, serializers.Serializer):
    source = StrictCharField(max_length=100)
    scope_type = StrictCharField(max_length=100)
    scope_id = StringOrIntegerField(max_length=200)
    profile = StrictCharField(max_length=50, required=False)
    webhook = StrictCharField(
        max_length=2000,
        required=False,
        help_text="An absolute http(s) URL that receives the job's events, signed per "
        "Standard Webhooks with the owner's secret (GET /agent/webhooks/secret). A host that "
        "is or resolves to a loopback, private, link-local, multicast or reserved address: "
        "400 invalid_webhook_url.",
    )
    webhook_events = serializers.ListField(
        child=serializers.ChoiceField(choices=webhooks.EVENTS),
        required=False,
        max_length=len(webhooks.EVENTS),
        help_text="Which events to send (default: finished, failed, cancelled; without a "
        "webhook, none). Each is a "
        'POST of {"type": "job.<event>", "timestamp", "data"}, data being what GET '
        "/agent/job/{id} shows then (the step, for job.step).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "webhook" in attrs:
            webhook_client.check_url(attrs["webhook"])  # InvalidWebhookUrl: 400
        return attrs

    def start_arguments(self) -> dict[str, Any]:
        """What every job start (a task, a chat) takes from a valid body, by keyword."""
        fields = self.validated_data
        return {
            "source": fields["source"],
            "scope_type": fields["scope_type"],
            "scope_id": fields["scope_id"],
            "profile_name": fields.get("profile"),
            "webhook": fields.get("webhook", ""),
            "webhook_events": fields.get("webhook_events"),
        }


class JobStartRequestSerializer(ScopedRequestSerializer):
    task = LimitedTextField(
        limit_setting="AGENT_TASK_MAX_CHARS",
        help_text="At most AGENT_TASK_MAX_CHARS characters (32,000 by default): "
        "413 payload_too_large with details.max_chars past it.",
    )


# --- Answers: the views render through these, and the schema is generated from them ------


class TruncatedJSONField(serializers.DictField):
    """A step's input or output: texts over VIEW_TEXT_LIMIT characters are cut in this view
    (never in storage)."""

    def to_representation(self, value: Any) -> Any:
        return truncate(value)


class JobStartDataSerializer(serializers.Serializer):
    job_id = serializers.CharField(source="pk")
    status = serializers.ChoiceField(choices=JobStatus.choices)


class JobStartResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = JobStartDataSerializer(source="*")


class JobCancelDataSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    status = serializers.ChoiceField(
        choices=[JobStatus.CANCELLING, JobStatus.CANCELLED],
        help_text="`cancelled` at once for a queued job; `cancelling` for a running one.",
    )


class JobCancelResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = JobCancelDataSerializer(source="*")


class StepSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=StepKind.choices)
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=StepStatus.choices)
    started_at = IsoDateTimeField()
    finished_at = IsoDateTimeField(allow_null=True)
    elapsed = serializers.FloatField(allow_null=True, help_text="Seconds.")
    input = TruncatedJSONField()
    output = TruncatedJSONField()


class CalculationStepSerializer(serializers.Serializer):
    expression = serializers.CharField()
    value = serializers.FloatField()


class CalculationSerializer(serializers.Serializer):
    expression = serializers.CharField(help_text="The last step's expression.")
    value = serializers.FloatField(
        required=False, help_text="The result; absent when the calculator refused a step."
    )
    error = serializers.CharField(required=False, help_text="Why the calculator refused it.")
    steps = CalculationStepSerializer(many=True, help_text="The steps worked out, in order.")


class TaskResultSerializer(serializers.Serializer):
    """A task job's result: who answered, and whether the agent checked it."""

    text = serializers.CharField(help_text="The answer.")
    answered_by = serializers.ChoiceField(
        choices=["calculator", "model"],
        help_text="`calculator`: the task was arithmetic the agent worked out with the "
        "calculator, step by step (`calculation`), or the answer says why it could not. "
        "`model`: the model's answer, which the agent could not check.",
    )
    verified = serializers.BooleanField(
        help_text="True when the agent checked the answer (`answered_by: calculator`); "
        "false for the model's answer."
    )
    model = serializers.CharField(required=False, help_text="The model that answered.")
    rounds = serializers.IntegerField(required=False, help_text="Model calls it took.")
    calculation = CalculationSerializer(
        required=False,
        help_text="The task's arithmetic worked out with the calculator, when it had some.",
    )


class ChatReplySerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["assistant"])
    content = serializers.CharField()
    seq = serializers.IntegerField()


class ChatResultSerializer(serializers.Serializer):
    conversation_id = serializers.CharField()
    message = ChatReplySerializer(help_text="The reply, as stored in the conversation.")


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="FinalResult",
        serializers=[TaskResultSerializer, ChatResultSerializer],
        resource_type_field_name=None,
    )
)
class FinalResultField(serializers.DictField):
    """A finished job's result: a task's answer or a chat's stored reply."""


class JobDataSerializer(serializers.Serializer):
    # Present only when they have a value.
    OPTIONAL = ("conversation_id", "final_result", "error")

    job_id = serializers.CharField(source="pk")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    kind = serializers.ChoiceField(choices=JobKind.choices)
    source = serializers.CharField()
    scope_type = serializers.CharField()
    scope_id = serializers.CharField()
    profile = serializers.CharField(source="profile.name")
    attempts = serializers.IntegerField(help_text="How many times a worker started the job.")
    created_at = IsoDateTimeField()
    started_at = IsoDateTimeField(allow_null=True)
    finished_at = IsoDateTimeField(allow_null=True)
    steps = StepSerializer(many=True, source="steps.all")
    conversation_id = serializers.CharField(required=False, help_text="Chat jobs only.")
    final_result = FinalResultField(
        required=False, help_text="Once finished: a task's answer, or a chat's stored reply."
    )
    error = serializers.CharField(required=False, help_text="Once failed.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        for name in self.OPTIONAL:
            if data.get(name) in (None, ""):
                data.pop(name, None)
        return data


class JobStatusResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = JobDataSerializer(source="*")


class WebhookSecretDataSerializer(serializers.Serializer):
    secret = serializers.CharField(help_text="`whsec_` + base64: verify webhooks with it.")
    previous_secret_signs_until = IsoDateTimeField(
        allow_null=True,
        help_text="After a rotation, the previous secret signs too until then (24 h).",
    )


class WebhookSecretResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = WebhookSecretDataSerializer(source="*")
