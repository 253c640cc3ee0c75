"""Reading a model's answer: a final answer, a tool call, or junk.

The tool-call format the agents teach the model is one JSON object,
``{"tool": "<name>", "arguments": {...}}``, optionally inside a code fence.
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_FORMAT = '{"tool": "<name>", "arguments": {...}}'
# What the agents tell (in a note) of a tool call that no tool list in the prompt offered.
NOT_OFFERED = "The answer is a tool call, but the prompt offered no tools."
# Options of a call that asks again after an unusable (empty) answer: greedy decoding
# would give the same answer again.
RETRY_OPTIONS = {"temperature": 0.7}


def retry_options(attempt: int) -> dict[str, Any]:
    """``RETRY_OPTIONS`` seeded by the model call's number within its turn or task: each
    retry samples differently, and the same conversation or task gets the same replies
    again (a run can be reproduced, a bench's two runs of one tree compared)."""
    return {**RETRY_OPTIONS, "seed": attempt}


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


@dataclass
class Answer:
    kind: str  # "final" | "tool" | "junk"
    text: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    problem: str = ""


def _json_object(text: str) -> Any:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object")
    return json.loads(text[start : end + 1])


def parse_answer(text: str) -> Answer:
    stripped = _FENCE.sub("", text.strip()).strip()
    if not stripped:
        return Answer(kind="junk", problem="The answer was empty.")
    looks_like_call = stripped.startswith("{") or re.search(r'"tool"\s*:', stripped)
    if not looks_like_call:
        return Answer(kind="final", text=text.strip())
    try:
        data = _json_object(stripped)
    except ValueError:
        return Answer(kind="junk", problem="The tool call is not valid JSON.")
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str) or not data["tool"]:
        return Answer(kind="junk", problem='A tool call needs a "tool" name.')
    arguments = data.get("arguments", data.get("args", {}))
    if not isinstance(arguments, dict):
        return Answer(kind="junk", problem='"arguments" must be a JSON object.')
    return Answer(kind="tool", tool=data["tool"], arguments=arguments)
