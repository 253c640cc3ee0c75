"""Opaque, time-sortable identifiers: a tag and a ULID (26 characters)."""

from ulid import ULID


def new_job_id() -> str:
    return f"job_{ULID()}"


def new_conversation_id() -> str:
    return f"conv_{ULID()}"
