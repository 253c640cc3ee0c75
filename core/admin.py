"""Admin building blocks shared by the apps."""

import json
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.html import format_html

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


def status_badge(status: str) -> str:
    """A job's status as a coloured label (the back office's stylesheet colours it)."""
    return format_html('<span class="job-status job-status-{}">{}</span>', status, status)


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds from ``start`` to ``end`` (to now while it runs); None before it started."""
    if start is None:
        return None
    return ((end or timezone.now()) - start).total_seconds()


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"
