"""A conversation's transcript for the admin: its newest messages, each with its job and
the context steps (of later chat jobs) whose prompt included it.

Three bounded queries: the newest ``limit`` messages, the context steps of those
messages' jobs, nothing per message. A context step records the window of recent messages
it showed (``window_start`` up to its own message) and the older ones it retrieved
(``retrieved_seqs``); a message was used by the steps whose window or retrieval holds it.
"""

from collections import defaultdict
from typing import Any

from agents.models import JobStatus, Step, StepKind
from conversations.models import Conversation, Message, Role

MESSAGES_SHOWN = 200
STEPS_PER_MESSAGE = 5


def _used_seqs(output: dict[str, Any], own_seq: int) -> set[int]:
    start = output.get("window_start")
    used = set(range(start, own_seq)) if isinstance(start, int) else set()
    used.update(seq for seq in output.get("retrieved_seqs") or () if isinstance(seq, int))
    return used


def transcript(conversation: Conversation, *, limit: int = MESSAGES_SHOWN) -> dict[str, Any]:
    messages = list(
        Message.objects.filter(conversation=conversation)
        .order_by("-seq")
        .values("pk", "seq", "role", "content", "created_at", "job_id", "job__status")[:limit]
    )[::-1]
    own_seq = {m["job_id"]: m["seq"] for m in messages if m["job_id"] and m["role"] == Role.USER}
    steps = (
        Step.objects.filter(job_id__in=list(own_seq), kind=StepKind.CONTEXT)
        .order_by("job_id", "index")
        .values("pk", "job_id", "index", "output")
    )
    used_by: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for step in steps:
        for seq in _used_seqs(step["output"] or {}, own_seq[step["job_id"]]):
            used_by[seq].append(step)
    for message in messages:
        # A question whose chat ended without a reply (interrupted, cancelled or failed).
        message["unanswered"] = message["role"] == Role.USER and message["job__status"] in (
            JobStatus.CANCELLED,
            JobStatus.FAILED,
        )
        users = used_by.get(message["seq"], [])
        message["context_steps"] = users[:STEPS_PER_MESSAGE]
        message["more_context_steps"] = max(0, len(users) - STEPS_PER_MESSAGE)
    return {
        "messages": messages,
        "shown": len(messages),
        "total": conversation.message_count,
    }
