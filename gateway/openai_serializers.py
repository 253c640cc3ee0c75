"""The request bodies of the OpenAI-compatible face (``/v1/``), checked as OpenAI checks
them; fields this service does not use are ignored, as OpenAI-compatible servers do (SDKs
send ``logprobs: false`` and the like), and the answers' shapes are documented here."""

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import NO_NUL, StrictCharField, StrictDictField
from core.serializers import CheckedBodyMixin

ROLES = ("system", "developer", "user", "assistant", "tool")
# Strings of these bodies hold no NUL character (core.serializers.CheckedBodyMixin).
TEXT = {"type": "string", "pattern": NO_NUL.pattern}


@extend_schema_field({"oneOf": [TEXT, {"type": "array", "items": TEXT, "maxItems": 4}]})
class StopField(serializers.Field):
    """A string or a list of at most four strings."""

    def to_internal_value(self, data: Any) -> str | list[str]:
        if isinstance(data, str):
            return data
        if isinstance(data, list) and len(data) <= 4 and all(isinstance(s, str) for s in data):
            return list(data)
        raise serializers.ValidationError("Must be a string or a list of at most 4 strings.")


class TextsField(serializers.Field):
    """A string or a non-empty list of strings, kept as a list."""

    max_items = 1

    def to_internal_value(self, data: Any) -> list[str]:
        texts = [data] if isinstance(data, str) else data
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise serializers.ValidationError("Must be a string or a non-empty list of strings.")
        if len(texts) > self.max_items:
            raise serializers.ValidationError(f"At most {self.max_items} items.")
        return texts


def _texts_schema(max_items: int) -> dict[str, Any]:
    array = {"type": "array", "items": TEXT, "minItems": 1, "maxItems": max_items}
    return {"oneOf": [TEXT, array]}


@extend_schema_field(_texts_schema(1))
class PromptField(TextsField):
    max_items = 1


@extend_schema_field(_texts_schema(2048))
class InputField(TextsField):
    max_items = 2048


@extend_schema_field(
    {
        "oneOf": [
            TEXT,
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["text"]},
                        "text": TEXT,
                    },
                    "required": ["type", "text"],
                },
            },
        ],
        "nullable": True,
    }
)
class ContentField(serializers.JSONField):
    """A string, or a list of ``text`` content parts."""


class MaxTokensField(serializers.IntegerField):
    """The answer's length in tokens; each runtime endpoint bounds it (``RUNTIME_MAX_PREDICT``
    on the default one): over the bound is 400 with ``param`` naming it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, allow_null=True, min_value=1, **kwargs)


class MaxTokensFieldSchema(OpenApiSerializerFieldExtension):
    """Documents the default runtime's bound, read when the schema is made."""

    target_class = MaxTokensField

    def map_serializer_field(self, auto_schema, direction):
        from django.conf import settings

        return {
            "type": "integer",
            "minimum": 1,
            "maximum": settings.RUNTIME_MAX_PREDICT,
            "nullable": True,
        }


class OpenAIMessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=ROLES)
    content = ContentField(
        required=False,
        allow_null=True,
        help_text="A string, or a list of content parts of which the `text` ones are read.",
    )

    def validate_content(self, content: Any) -> Any:
        if content is None or isinstance(content, str):
            return content
        if isinstance(content, list) and all(isinstance(part, dict) for part in content):
            for part in content:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise serializers.ValidationError("Only text content parts are supported.")
            return content
        raise serializers.ValidationError("Must be a string or a list of content parts.")


class StreamOptionsSerializer(serializers.Serializer):
    include_usage = serializers.BooleanField(required=False, default=False)


class ResponseFormatSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=("text", "json_object", "json_schema"))
    json_schema = StrictDictField(required=False)


class _Sampling(CheckedBodyMixin, serializers.Serializer):
    model = StrictCharField(max_length=200)
    temperature = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=2)
    top_p = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=1)
    max_tokens = MaxTokensField()
    stop = StopField(required=False, allow_null=True)
    seed = serializers.IntegerField(required=False, allow_null=True)
    presence_penalty = serializers.FloatField(
        required=False, allow_null=True, min_value=-2, max_value=2
    )
    frequency_penalty = serializers.FloatField(
        required=False, allow_null=True, min_value=-2, max_value=2
    )
    n = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=1, help_text="1 only."
    )
    stream = serializers.BooleanField(required=False, default=False)
    stream_options = StreamOptionsSerializer(required=False, allow_null=True)
    user = StrictCharField(required=False, max_length=200)


class ChatCompletionRequestSerializer(_Sampling):
    messages = serializers.ListField(child=OpenAIMessageSerializer(), min_length=1)
    max_completion_tokens = MaxTokensField()
    response_format = ResponseFormatSerializer(required=False, allow_null=True)
    metadata = serializers.DictField(
        child=StrictCharField(max_length=512, allow_blank=True),
        required=False,
        allow_null=True,
        help_text=(
            "For `agent/<profile>` models: `source`, `scope_type` and `scope_id` name the "
            "conversation."
        ),
    )


@extend_schema_field({"type": "boolean", "enum": [False], "description": "Not supported."})
class FalseField(serializers.BooleanField):
    pass


class CompletionRequestSerializer(_Sampling):
    prompt = PromptField(help_text="One prompt (a string, or a list of one).")
    echo = FalseField(required=False, default=False)

    def validate_echo(self, echo: bool) -> bool:
        if echo:
            raise serializers.ValidationError("echo is not supported.")
        return echo


class EmbeddingRequestSerializer(CheckedBodyMixin, serializers.Serializer):
    model = StrictCharField(max_length=200)
    input = InputField()
    encoding_format = serializers.ChoiceField(
        choices=("float", "base64"), required=False, default="float"
    )
    dimensions = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Must be the model's own."
    )
    user = StrictCharField(required=False, max_length=200)


# --- Answers (documented in the schema; built by gateway.openai_wire) ---------------------


class OpenAIErrorDetailSerializer(serializers.Serializer):
    message = serializers.CharField()
    type = serializers.CharField()
    param = serializers.CharField(allow_null=True)
    code = serializers.CharField()


class OpenAIErrorSerializer(serializers.Serializer):
    error = OpenAIErrorDetailSerializer()


class OpenAIModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created = serializers.IntegerField()
    owned_by = serializers.CharField()


class OpenAIModelListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = OpenAIModelSerializer(many=True)


class OpenAIUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class OpenAIChatMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField()


class OpenAIChatChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    message = OpenAIChatMessageSerializer()
    finish_reason = serializers.CharField()


# The fields a completion of OpenAI's API (chat or text) starts with. (No docstring: the
# schema would take it as the description of both answers.)
class OpenAIObjectSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created = serializers.IntegerField()
    model = serializers.CharField()


class ChatCompletionSerializer(OpenAIObjectSerializer):
    choices = OpenAIChatChoiceSerializer(many=True)
    usage = OpenAIUsageSerializer()
    conversation_id = serializers.CharField(required=False, help_text="Agent models only.")
    job_id = serializers.CharField(required=False, help_text="Agent models only.")


class OpenAICompletionChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    text = serializers.CharField()
    finish_reason = serializers.CharField()


class CompletionSerializer(OpenAIObjectSerializer):
    choices = OpenAICompletionChoiceSerializer(many=True)
    usage = OpenAIUsageSerializer()


@extend_schema_field(
    {
        "oneOf": [
            {"type": "array", "items": {"type": "number"}},
            {"type": "string", "description": "base64 of little-endian float32 values"},
        ]
    }
)
class VectorField(serializers.JSONField):
    """The numbers, or with ``encoding_format: base64`` their float32 bytes in base64."""


class OpenAIEmbeddingSerializer(serializers.Serializer):
    object = serializers.CharField()
    index = serializers.IntegerField()
    embedding = VectorField()


class EmbeddingListSerializer(serializers.Serializer):
    object = serializers.CharField()
    data = OpenAIEmbeddingSerializer(many=True)
    model = serializers.CharField()
    usage = serializers.DictField(child=serializers.IntegerField())


class OpenAIStreamEventSerializer(serializers.Serializer):
    """One server-sent event of a stream, as an SSE client reads it."""

    data = serializers.CharField(help_text="A chunk's JSON, or `[DONE]` last.")
    event = serializers.CharField(required=False, help_text="Not sent: `message`.")
