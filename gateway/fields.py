"""Serializer fields that refuse what DRF would otherwise coerce (``123`` into ``"123"``)."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A string and only a string; never trimmed, so a prompt is forwarded byte for byte."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class StrictDictField(serializers.DictField):
    """A JSON object (``null`` and other types are refused)."""

    default_error_messages = {"not_a_dict": "Must be a JSON object."}

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, dict):
            self.fail("not_a_dict", input_type=type(data).__name__)
        return dict(data)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "integer"}]})
class StringOrIntegerField(serializers.Field):
    """A non-empty string or an integer (not a boolean), kept as its string form."""

    default_error_messages = {
        "invalid": "Must be a string or an integer.",
        "blank": "This field may not be blank.",
        "max_length": "Ensure this field has no more than {max_length} characters.",
    }

    def __init__(self, *, max_length: int = 200, **kwargs: Any) -> None:
        self.max_length = max_length
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("invalid")
        value = str(data)
        if not value.strip():
            self.fail("blank")
        if len(value) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return value

    def to_representation(self, value: Any) -> str:
        return str(value)
