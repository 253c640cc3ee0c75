from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import ConstantField, StrictCharField, StrictDictField
from core.serializers import CheckedBodyMixin
from gateway.options import option_errors, options_schema


@extend_schema_field(options_schema())
class OptionsField(StrictDictField):
    """A JSON object whose known Ollama options obey their rules (``gateway.options``)."""

    def to_internal_value(self, data: Any) -> dict:
        options = super().to_internal_value(data)
        errors = option_errors(options)
        if errors:
            raise serializers.ValidationError(errors)
        return options


class LLMRequestSerializer(CheckedBodyMixin, serializers.Serializer):
    # api_key is checked before this serializer runs (401 comes before 400 on fields).
    api_key = StrictCharField(help_text="Checked first: 401 invalid_api_key unless live.")
    model = StrictCharField(max_length=200)
    prompt = StrictCharField()
    options = OptionsField(required=False)


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(
        allow_null=True, help_text="As counted by the runtime; null when it does not say."
    )
    completion_tokens = serializers.IntegerField(allow_null=True)


class LLMSuccessResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    model = serializers.CharField()
    response = serializers.CharField(allow_blank=True)
    elapsed = serializers.FloatField(help_text="Wall-clock seconds, millisecond precision.")
    usage = UsageSerializer(source="*")


class HealthDataSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["alive"])


class HealthResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = HealthDataSerializer(source="*")


class ReadyDataSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ready"])
    checks = serializers.DictField(
        child=serializers.CharField(),
        help_text="`database` and `runtime:<name>` of every runtime endpoint: `ok` or why not.",
    )


class ReadyResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = ReadyDataSerializer(source="*")
