"""Examples of the chat endpoints' requests and answers for the API docs (the demo profile,
plausible scope ids), checked against the schema by tests/test_schema.py."""

import json

from agents.examples import stream_event
from core.schema import example

CONVERSATION_ID = "conv_01JDX7R0C4W8H2M6P9S3D5F7GA"
JOB_ID = "job_01JDX7R0C5N3B7Q1T4V8Y2K6HB"
SCOPE = {"source": "helpdesk", "scope_type": "ticket", "scope_id": "T-1042"}

CHAT_START = example(
    "A chat turn",
    request={**SCOPE, "prompt": "My printer is called Hermes.", "profile": "default"},
    answer={
        "ok": True,
        "data": {"job_id": JOB_ID, "status": "queued", "conversation_id": CONVERSATION_ID},
    },
)
CONVERSATION = example(
    "A conversation",
    answer={
        "ok": True,
        "data": {
            "conversation_id": CONVERSATION_ID,
            **SCOPE,
            "messages": [
                {
                    "role": "user",
                    "content": "My printer is called Hermes.",
                    "created_at": "2026-11-25T09:31:00.100000+00:00",
                    "seq": 1,
                },
                {
                    "role": "assistant",
                    "content": "Nice to meet Hermes.",
                    "created_at": "2026-11-25T09:31:01.400000+00:00",
                    "seq": 2,
                },
            ],
            "has_more": False,
        },
    },
)
# Three events of GET /agent/conversation/{id}/events.
CONVERSATION_EVENTS = [
    stream_event(
        "message",
        {
            "id": "3000000",
            "event": "message",
            "data": json.dumps(
                {
                    "role": "user",
                    "content": "My printer is called Hermes.",
                    "created_at": "2026-11-25T09:31:00.100000+00:00",
                    "seq": 3,
                }
            ),
        },
    ),
    stream_event(
        "token",
        {"id": "3000008", "event": "token", "data": json.dumps({"step": 1, "text": "Nice"})},
    ),
    stream_event(
        "discard",
        {
            "id": "3000012",
            "event": "discard",
            "data": json.dumps({"step": 1, "reason": "borrowed"}),
        },
    ),
]
