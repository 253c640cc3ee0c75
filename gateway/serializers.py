from rest_framework import serializers

from gateway.fields import StrictCharField, StrictDictField


class LLMRequestSerializer(serializers.Serializer):
    # api_key is checked before this serializer runs (401 comes before 400 on fields).
    api_key = StrictCharField(help_text="Checked first: 401 invalid_api_key unless live.")
    model = StrictCharField(max_length=200)
    prompt = StrictCharField()
    options = StrictDictField(required=False)


class LLMSuccessResponseSerializer(serializers.Serializer):
    ok = serializers.BooleanField(default=True)
    model = serializers.CharField()
    response = serializers.CharField()
    elapsed = serializers.FloatField(help_text="Wall-clock seconds, millisecond precision.")


class ErrorResponseSerializer(serializers.Serializer):
    ok = serializers.BooleanField(default=False)
    error = serializers.CharField(help_text="Stable snake_case error id.")
    message = serializers.CharField()
    details = serializers.DictField()
