"""The agent of task jobs: prompt, model call, tool calls, until a final answer.

Each round is one model call. An answer that asks for a tool runs it as a step and feeds
the result into the next prompt; a junk answer is told so; after ``profile.max_steps``
model calls without a final answer the job fails with that reason.
"""

import json
from typing import Any

from agents.answers import TOOL_CALL_FORMAT, parse_answer
from agents.context import AgentFailure, JobContext
from agents.tools import enabled_tools


def task_prompt(ctx: JobContext, transcript: list[str]) -> str:
    profile = ctx.profile
    parts = [profile.system_prompt.strip()] if profile.system_prompt.strip() else []
    tools = enabled_tools(profile.tools)
    if tools:
        parts.append(
            "You may use these tools. To use one, answer with only this JSON on one line:\n"
            f"{TOOL_CALL_FORMAT}\n"
            + "\n".join(t.describe() for t in tools)
            + "\nOtherwise give the final answer as plain text."
        )
    parts.append(f"Task: {ctx.job.task}")
    parts.extend(transcript)
    parts.append("Answer:")
    return "\n\n".join(parts)


def run_task(ctx: JobContext) -> dict[str, Any]:
    transcript: list[str] = []
    max_steps = ctx.profile.max_steps
    for round_number in range(1, max_steps + 1):
        text = ctx.call_model(task_prompt(ctx, transcript))
        answer = parse_answer(text)
        if answer.kind == "final":
            return {"text": answer.text, "model": ctx.profile.model, "rounds": round_number}
        if answer.kind == "junk":
            ctx.note("unusable_answer", {"problem": answer.problem, "answer": text[:2000]})
            transcript.append(
                f"(Your last answer could not be used: {answer.problem} Answer with a tool "
                "call or the final answer.)"
            )
            continue
        result = ctx.call_tool(answer.tool, answer.arguments, enabled=ctx.profile.tools)
        call = json.dumps({"tool": answer.tool, "arguments": answer.arguments})
        transcript.append(f"Tool call: {call}\nTool result: {json.dumps(result, default=str)}")
    raise AgentFailure(f"The model gave no usable final answer within {max_steps} model calls.")
