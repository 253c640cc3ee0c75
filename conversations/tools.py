"""The history tools, registered in ``agents.tools.REGISTRY`` when the app loads.

The chat agent uses them itself before it calls the model (``conversations.chat_agent``),
and offers them to the model in the agents' tool-call format. A task job uses them on the
conversation of its scope. Either way a job only reads what its scope allows
(``selectors.history_scope``).
"""

from typing import Any

from agents.tools import ToolError, tool
from conversations import selectors
from conversations.retrieval import MODES, find_messages

SEARCH_LIMIT_MAX = 50
READ_LIMIT_MAX = 50


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A message as a tool returns it (JSON-ready)."""
    created = row.get("created_at")
    return {
        "seq": row["seq"],
        "role": row["role"],
        "content": row["content"],
        "tokens": row["token_estimate"],
        "created_at": created.isoformat() if created else None,
        **({"similarity": row["similarity"]} if "similarity" in row else {}),
        # Why a row came along (conversations.linked): the name, the hit it updates ...
        **({"via": row["via"]} if "via" in row else {}),
        **({"updates": row["updates"]} if "updates" in row else {}),
        # ... or the question's subject phrase that found it alone (conversations.subjects).
        **({"about": row["about"]} if "about" in row else {}),
    }


def _scope(ctx: Any, before_seq: int | None) -> tuple[str, int | None]:
    scope = selectors.history_scope(ctx.job)
    if scope is None:
        raise ToolError("There is no conversation for this job's scope yet.")
    conversation_id, bound = scope
    if before_seq is not None and (bound is None or before_seq < bound):
        bound = before_seq
    return conversation_id, bound


@tool(
    "search_history",
    "Searches the older messages of this conversation by their words and their meaning "
    "(mode: hybrid, the default; text; or semantic); best matches first.",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 500},
            "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX},
            "before_seq": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": list(MODES)},
        },
        "required": ["query"],
    },
)
def search_history(
    ctx: Any, query: str, limit: int = 8, before_seq: int | None = None, mode: str = "hybrid"
) -> dict[str, Any]:
    conversation_id, bound = _scope(ctx, before_seq)
    found = find_messages(
        conversation_id=conversation_id, query=query, limit=limit, before_seq=bound, mode=mode
    )
    result = {"query": query, "mode": found.mode, "messages": [public(row) for row in found.rows]}
    if found.dropped:
        result["left_out"] = found.dropped
    if found.fallback:
        result["fallback"] = found.fallback
    return result


@tool(
    "read_history",
    "Reads the messages of this conversation just before a message number, oldest first.",
    {
        "type": "object",
        "properties": {
            "before_seq": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": READ_LIMIT_MAX},
        },
        "required": [],
    },
)
def read_history(ctx: Any, before_seq: int | None = None, limit: int = 10) -> dict[str, Any]:
    conversation_id, bound = _scope(ctx, before_seq)
    rows = selectors.messages_before(conversation_id=conversation_id, before_seq=bound, limit=limit)
    return {"before_seq": bound, "messages": [public(row) for row in reversed(rows)]}
