"""Serializer fields shared by the apps: input fields that refuse what DRF would otherwise
coerce (``123`` into ``"123"``), and output fields of the answers."""

import re
from datetime import datetime
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.exceptions import FieldTooLarge

# NUL cannot be stored in PostgreSQL text: DRF's CharField refuses it, and so do these.
NO_NUL = re.compile(r"^[^\x00]*$")
# Some character that is neither white space nor NUL.
NON_SPACE = re.compile(r"^[^\x00]*[^\s\x00][^\x00]*$")


class StrictCharField(serializers.CharField):
    """A string and only a string; never trimmed, so a prompt is forwarded byte for byte."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        if not kwargs.get("allow_blank"):
            kwargs.setdefault("min_length", 1)  # documents the refusal of "" (minLength)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class LimitedTextField(StrictCharField):
    """A :class:`StrictCharField` at most ``settings.<limit_setting>`` characters long (read
    when checked); a longer one is :class:`FieldTooLarge` (413 with the limit in details)."""

    def __init__(self, *, limit_setting: str, **kwargs: Any) -> None:
        self.limit_setting = limit_setting
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        limit = getattr(settings, self.limit_setting)
        if len(value) > limit:
            raise FieldTooLarge(field=self.field_name, max_chars=limit, chars=len(value))
        return value


class StrictCharFieldSchema(OpenApiSerializerFieldExtension):
    """Documents the refusal of NUL characters (DRF's validator) as a pattern."""

    target_class = StrictCharField
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "pattern": NO_NUL.pattern}


class StrictDictField(serializers.DictField):
    """A JSON object (``null`` and other types are refused)."""

    default_error_messages = {"not_a_dict": "Must be a JSON object."}

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, dict):
            self.fail("not_a_dict", input_type=type(data).__name__)
        return dict(data)


INT64 = 2**63


class StringOrIntegerField(serializers.Field):
    """A string with a non-space character, or a 64-bit integer (not a boolean), kept as
    its string form."""

    default_error_messages = {
        "invalid": "Must be a string or an integer.",
        "blank": "This field may not be blank.",
        "max_length": "Ensure this field has no more than {max_length} characters.",
        "integer_range": "Must be a 64-bit integer.",
        "null_characters": "Null characters are not allowed.",
    }

    def __init__(self, *, max_length: int = 200, **kwargs: Any) -> None:
        self.max_length = max_length
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("invalid")
        if isinstance(data, int) and not -INT64 <= data < INT64:
            self.fail("integer_range")
        value = str(data)
        if "\x00" in value:
            self.fail("null_characters")
        if not NON_SPACE.search(value):
            self.fail("blank")
        if len(value) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return value

    def to_representation(self, value: Any) -> str:
        return str(value)


class StringOrIntegerFieldSchema(OpenApiSerializerFieldExtension):
    target_class = StringOrIntegerField

    def map_serializer_field(self, auto_schema, direction):
        text = {
            "type": "string",
            "minLength": 1,
            "maxLength": self.target.max_length,
            "pattern": NON_SPACE.pattern,
        }
        number = {"type": "integer", "minimum": -INT64, "maximum": INT64 - 1}
        return {"oneOf": [text, number]}


@extend_schema_field(OpenApiTypes.DATETIME)
class IsoDateTimeField(serializers.Field):
    """An aware datetime as ISO 8601 with its offset (``+00:00``; DRF would write ``Z``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class ConstantField(serializers.Field):
    """Always ``value`` (the envelope's ``ok``); documented as that one value."""

    def __init__(self, value: Any, **kwargs: Any) -> None:
        self.value = value
        kwargs.update(read_only=True, source="*")
        super().__init__(**kwargs)

    def to_representation(self, instance: Any) -> Any:
        return self.value


class ConstantFieldSchema(OpenApiSerializerFieldExtension):
    """Documents :class:`ConstantField` (found by subclassing) as ``enum: [value]``."""

    target_class = ConstantField

    def map_serializer_field(self, auto_schema, direction):
        value = self.target.value
        kind = {bool: "boolean", int: "integer", str: "string"}[type(value)]
        return {"type": kind, "enum": [value]}
