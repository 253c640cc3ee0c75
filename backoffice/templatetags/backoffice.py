"""Template helpers of the back office: readable step input/output, coloured statuses."""

import json
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html

register = template.Library()


def readable_fields(value: Any) -> list[tuple[str, str, bool]]:
    """``(name, text, is_text)`` per top-level field: strings as they are (a prompt or a
    reply reads as text, its newlines kept), everything else as indented JSON."""
    if not isinstance(value, dict):
        return [("", _json(value), False)]
    return [
        (str(name), item, True) if isinstance(item, str) else (str(name), _json(item), False)
        for name, item in value.items()
    ]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


register.filter("readable", readable_fields)


@register.simple_tag
def status_badge(status: str) -> str:
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


register.filter("seconds", format_seconds)
