"""Opaque, time-sortable identifiers: a tag and a ULID (26 characters)."""

import re

from ulid import ULID

# A ULID in Crockford's base 32, as ``str(ULID())`` writes it.
_ULID = "[0-7][0-9A-HJKMNP-TV-Z]{25}"
_JOB_ID = re.compile(f"job_{_ULID}")
_CONVERSATION_ID = re.compile(f"conv_{_ULID}")


def new_job_id() -> str:
    return f"job_{ULID()}"


def new_conversation_id() -> str:
    return f"conv_{ULID()}"


def is_job_id(value: str) -> bool:
    """Whether ``value`` could be a job id: anything else (a NUL from ``%00`` in a URL, say)
    is known not to exist without asking the database."""
    return _JOB_ID.fullmatch(value) is not None


def is_conversation_id(value: str) -> bool:
    return _CONVERSATION_ID.fullmatch(value) is not None
