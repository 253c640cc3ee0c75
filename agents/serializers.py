from collections.abc import Mapping

from rest_framework import serializers

from gateway.fields import StrictCharField, StringOrIntegerField


class RejectUnknownFieldsMixin:
    """Unknown fields are a 400 validation_error, not silently dropped."""

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) else []
        errors = {name: ["Unknown field."] for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({**exc.detail, **errors}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


class ScopedRequestSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    source = StrictCharField(max_length=100)
    scope_type = StrictCharField(max_length=100)
    scope_id = StringOrIntegerField(max_length=200)
    profile = StrictCharField(max_length=50, required=False)


class JobStartRequestSerializer(ScopedRequestSerializer):
    task = StrictCharField()


class JobStartDataSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "running"])


class JobStartResponseSerializer(serializers.Serializer):
    ok = serializers.BooleanField(default=True)
    data = JobStartDataSerializer()


class StepSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["model_call", "tool_call", "context", "note"])
    name = serializers.CharField()
    status = serializers.CharField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    elapsed = serializers.FloatField(allow_null=True, help_text="Seconds.")
    input = serializers.DictField()
    output = serializers.DictField()


class JobDataSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["queued", "running", "cancelling", "finished", "failed", "cancelled"]
    )
    kind = serializers.ChoiceField(choices=["task", "chat"])
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    steps = StepSerializer(many=True)
    final_result = serializers.DictField(required=False)
    error = serializers.CharField(required=False)


class JobStatusResponseSerializer(serializers.Serializer):
    ok = serializers.BooleanField(default=True)
    data = JobDataSerializer()
