"""Template helpers of the back office: readable step input/output, coloured statuses."""

import json
from typing import Any

from django import template

from core.admin import format_seconds, status_badge

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


register.simple_tag(status_badge)
register.filter("seconds", format_seconds)
