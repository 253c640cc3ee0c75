"""Examples of the job endpoints' requests and answers for the API docs (the demo profile,
plausible scope ids), checked against the schema by tests/test_schema.py."""

import json

from drf_spectacular.utils import OpenApiExample

from core.schema import example

JOB_ID = "job_01JDX7Q2M8K4Z9V3T6R5N1B0CA"
SCOPE = {"source": "helpdesk", "scope_type": "ticket", "scope_id": "T-1042"}
TASK = "Add 17 and 25, then multiply by 3."

JOB_START = example(
    "A task",
    request={**SCOPE, "task": TASK, "profile": "default"},
    answer={"ok": True, "data": {"job_id": JOB_ID, "status": "queued"}},
)
JOB_STATUS = example(
    "A finished task",
    answer={
        "ok": True,
        "data": {
            "job_id": JOB_ID,
            "status": "finished",
            "kind": "task",
            **SCOPE,
            "profile": "default",
            "attempts": 1,
            "created_at": "2026-11-25T09:30:00.120000+00:00",
            "started_at": "2026-11-25T09:30:00.180000+00:00",
            "finished_at": "2026-11-25T09:30:00.230000+00:00",
            "steps": [
                {
                    "index": 1,
                    "kind": "tool_call",
                    "name": "calculator",
                    "status": "finished",
                    "started_at": "2026-11-25T09:30:00.190000+00:00",
                    "finished_at": "2026-11-25T09:30:00.200000+00:00",
                    "elapsed": 0.01,
                    "input": {"arguments": {"expression": "17 + 25"}},
                    "output": {"result": {"expression": "17 + 25", "value": 42}},
                },
                {
                    "index": 2,
                    "kind": "tool_call",
                    "name": "calculator",
                    "status": "finished",
                    "started_at": "2026-11-25T09:30:00.210000+00:00",
                    "finished_at": "2026-11-25T09:30:00.220000+00:00",
                    "elapsed": 0.01,
                    "input": {"arguments": {"expression": "42 * 3"}},
                    "output": {"result": {"expression": "42 * 3", "value": 126}},
                },
            ],
            "final_result": {
                "text": "126",
                "answered_by": "calculator",
                "verified": True,
                "calculation": {
                    "expression": "42 * 3",
                    "value": 126,
                    "steps": [
                        {"expression": "17 + 25", "value": 42},
                        {"expression": "42 * 3", "value": 126},
                    ],
                },
            },
        },
    },
)
JOB_CANCEL = example(
    "A running job", answer={"ok": True, "data": {"job_id": JOB_ID, "status": "cancelling"}}
)
WEBHOOK_SECRET = example(
    "The owner's signing secret, rotated an hour ago",
    answer={
        "ok": True,
        "data": {
            "secret": "whsec_MfKQ9r8GKYqXbnk3kQ4h8JmU2tVt0n0x",
            "previous_secret_signs_until": "2026-11-26T08:00:00+00:00",
        },
    },
)
WEBHOOK_SECRET_ROTATE = example(
    "A new secret; the previous one signs for 24 h",
    answer={
        "ok": True,
        "data": {
            "secret": "whsec_Qm9yZSBzZWNyZXQgYnl0ZXMgaGVyZQ==",
            "previous_secret_signs_until": "2026-11-26T09:30:00+00:00",
        },
    },
)


def stream_event(name: str, value: dict) -> OpenApiExample:
    """An event of a stream's 200 answer, as its example."""
    return OpenApiExample(
        name, value=value, response_only=True, status_codes=["200"], media_type=EVENT_STREAM
    )


EVENT_STREAM = "text/event-stream"
# The events of a stream (each is sent as its ``id:``, ``event:`` and ``data:`` lines).
JOB_EVENTS = [
    stream_event(name, {"id": str(event_id), "event": kind, "data": json.dumps(data)})
    for name, event_id, kind, data in (
        ("status", 2, "status", {"job_id": JOB_ID, "status": "running"}),
        ("token", 7, "token", {"step": 1, "text": "17 + 25 is 42"}),
        (
            "finished",
            12,
            "status",
            {
                "job_id": JOB_ID,
                "status": "finished",
                "final_result": {"text": "126", "answered_by": "calculator", "verified": True},
            },
        ),
    )
]
