"""Log records with the request's context, as text or as one JSON object per line.

``LOG_FORMAT=json`` (config/settings.py, deploy/gunicorn.conf.py) formats every line of the
web server and the worker with :class:`JsonFormatter`; the default stays readable text.
Either way :class:`ContextFilter` puts ``request_id`` and ``job_id`` on every record.
No line holds a prompt, a reply or a key: the code logs ids and error ids, not texts.
"""

import json
import logging
from datetime import UTC, datetime

from core import requestid

# Attributes every LogRecord has: anything else on a record is extra context.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "request_id",
    "job_id",
    "context",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours
}


class ContextFilter(logging.Filter):
    """Adds ``request_id`` and ``job_id`` (empty outside a request or a job), and
    ``context``, the two as text for the plain format."""

    def filter(self, record: logging.LogRecord) -> bool:
        rid, jid = requestid.request_id.get(), requestid.job_id.get()
        record.request_id, record.job_id = rid, jid
        parts = [f"request_id={rid}"] if rid else []
        if jid:
            parts.append(f"job_id={jid}")
        record.context = f" [{' '.join(parts)}]" if parts else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``timestamp``, ``level``, ``logger``, ``message``, the
    ids of :class:`ContextFilter` when set, any ``extra`` fields, and ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or requestid.request_id.get()
        jid = getattr(record, "job_id", None) or requestid.job_id.get()
        if rid:
            entry["request_id"] = rid
        if jid:
            entry["job_id"] = jid
        for name, value in record.__dict__.items():
            if name not in _STANDARD and not name.startswith("_"):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def logging_config(*, json_format: bool, level: str) -> dict:
    """The ``LOGGING`` dictionary of the settings (and of gunicorn's own loggers)."""
    formatter = (
        {"()": "core.logs.JsonFormatter"}
        if json_format
        else {"format": "%(asctime)s %(levelname)s %(name)s%(context)s %(message)s"}
    )
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "main",
        "filters": ["context"],
    }
    own = {"handlers": ["console"], "propagate": False}
    # gunicorn's and uvicorn's own lines, in JSON too, at gunicorn's level (info) unless
    # more or less is asked; in text they keep gunicorn's own format.
    server = {**own, "level": level}
    servers = ("gunicorn.error", "gunicorn.access", "uvicorn.error", "uvicorn.access")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "core.logs.ContextFilter"}},
        "formatters": {"main": formatter},
        "handlers": {"console": handler},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.request": {"level": "ERROR"},
            # django-q2 adds a handler of its own to a logger that has none.
            "django-q": {**own, "level": level},
            **({name: server for name in servers} if json_format else {}),
        },
    }
