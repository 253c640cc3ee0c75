"""Serializers every app uses: the error envelope, and refusing unknown fields."""

from collections.abc import Mapping

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from core.fields import ConstantField
from core.http import value_problems


class ErrorResponseSerializer(serializers.Serializer):
    ok = ConstantField(False)
    error = serializers.CharField(help_text="Stable snake_case error id.")
    message = serializers.CharField()
    details = serializers.DictField(help_text="Always an object; `{}` when there is no more.")


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


class CheckedBodyMixin:
    """Before any field: no string of the body, at any depth, holds a NUL character or an
    unpaired surrogate, and no number is infinite (``core.http.value_problems``)."""

    def to_internal_value(self, data):
        problems = value_problems(data) if self.parent is None else {}
        if problems:
            raise serializers.ValidationError(problems)
        return super().to_internal_value(data)


class RejectUnknownFieldsSchema(OpenApiSerializerExtension):
    """Documents the refusal: ``additionalProperties: false`` (found by subclassing)."""

    target_class = RejectUnknownFieldsMixin
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_basic_serializer(self.target, direction)
        return {**schema, "additionalProperties": False}
