"""Admin building blocks shared by the apps."""

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models

from core.http import is_unstorable, value_problems


class StorableJSONField(forms.JSONField):
    """The admin's JSON field: JSON that the database cannot store (a NUL character or an
    unpaired surrogate in a string, a non-finite number) is a form error, never a 500."""

    def validate(self, value: Any) -> None:
        super().validate(value)
        problems = value_problems(value)
        if problems:
            raise ValidationError(
                [
                    f"{path}: {message}"
                    for path, messages in problems.items()
                    for message in messages
                ],
                code="unstorable",
            )

    def prepare_value(self, value: Any) -> str:
        """The JSON shown back in the form: what it cannot show as text (a NUL, an unpaired
        surrogate) as ``\\u`` escapes, as the user typed it."""
        text = super().prepare_value(value)
        if isinstance(text, str) and is_unstorable(text):
            return json.dumps(value, cls=self.encoder)
        return text


class ServiceAdmin(admin.ModelAdmin):
    """An admin whose forms staff fill in: its JSON fields refuse what cannot be stored."""

    formfield_overrides = {models.JSONField: {"form_class": StorableJSONField}}


class HistoryAdmin(admin.ModelAdmin):
    """A history table: staff read it; rows are written by the service only."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
