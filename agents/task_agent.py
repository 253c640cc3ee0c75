"""The agent of task jobs: prompt, model call, tool calls, until a final answer.

Each round is one model call. An answer that asks for a tool runs it as a step and feeds
the result into the next prompt; a junk answer is told so; after ``profile.max_steps``
model calls without a final answer the job fails with that reason. The final answer is
cleaned of what the model invented around it (``agents.replies``).

How the prompt is written follows the profile's prompt style:

* ``chat`` (instruction-tuned models): chat messages; the system message lists the tools.
* ``transcript`` (base models): one prompt shaped for completion, without a tool list;
  a tool call in the model's answer is not run (nothing offered it: it echoes the task).
  When the task is arithmetic and the calculator is enabled, the agent itself works it
  out with the calculator first (a ``tool_call`` step) and puts the result in the
  prompt: a small base model cannot compute, and does not ask for tools.
"""

import json
from typing import Any

from agents.answers import NOT_OFFERED, TOOL_CALL_FORMAT, parse_answer
from agents.arithmetic import arithmetic_expression, format_value
from agents.context import AgentFailure, JobContext
from agents.kinds import agent
from agents.models import JobKind
from agents.replies import clean_reply
from agents.tools import enabled_tools

ANSWER_CUE = "Answer:"
# A base model's answer to a task ends where it would start another block.
TASK_STOPS = ["\n\n", "\nTask:", "\nQuestion:"]

# One turn of the exchange after the task: (role, text).
Turn = tuple[str, str]


def _tools_block(ctx: JobContext) -> str:
    tools = enabled_tools(ctx.profile.tools)
    if not tools:
        return ""
    return (
        "You may use these tools. To use one, answer with only this JSON on one line:\n"
        f"{TOOL_CALL_FORMAT}\n"
        + "\n".join(t.describe() for t in tools)
        + "\nOtherwise give the final answer as plain text."
    )


def _task_lines(ctx: JobContext, calculation: dict[str, Any] | None) -> str:
    lines = [f"Task: {ctx.job.task}"]
    if calculation is not None and "error" in calculation:  # the model can say why
        lines.append(f"Calculator: {calculation['expression']}: {calculation['error']}")
    elif calculation is not None:
        value = format_value(calculation["value"])
        lines.append(f"Calculator: {calculation['expression']} = {value}")
    return "\n".join(lines)


def task_prompt(
    ctx: JobContext, transcript: list[Turn], calculation: dict[str, Any] | None = None
) -> str:
    """The task as one prompt for completion (transcript style: no tool list)."""
    system = ctx.profile.system_prompt.strip()
    parts = [system] if system else []
    parts.append(_task_lines(ctx, calculation))
    parts.extend(("Tool call: " if role == "assistant" else "") + text for role, text in transcript)
    parts.append(ANSWER_CUE)
    return "\n\n".join(parts)


def task_messages(ctx: JobContext, transcript: list[Turn]) -> list[dict[str, str]]:
    """The task as chat messages (chat style: the system message lists the tools)."""
    system = "\n\n".join(p for p in (ctx.profile.system_prompt.strip(), _tools_block(ctx)) if p)
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": _task_lines(ctx, None)})
    messages += [{"role": role, "content": text} for role, text in transcript]
    return messages


def precompute(ctx: JobContext) -> dict[str, Any] | None:
    """For a base-model profile with the calculator: the task's arithmetic, worked out
    (``value``), or why the calculator refused it (``error``)."""
    profile = ctx.profile
    if not profile.is_transcript or "calculator" not in profile.tools:
        return None
    expression = arithmetic_expression(ctx.job.task)
    if expression is None:
        return None
    outcome = ctx.call_tool("calculator", {"expression": expression}, enabled=profile.tools)
    return outcome.get("result") or {"expression": expression, "error": outcome["error"]}


def _call(ctx: JobContext, transcript: list[Turn], calculation: dict[str, Any] | None) -> str:
    if ctx.profile.is_transcript:
        stops = list(ctx.profile.options.get("stop") or [])
        stops += [s for s in TASK_STOPS if s not in stops]
        return ctx.call_model(task_prompt(ctx, transcript, calculation), options={"stop": stops})
    return ctx.call_model("", messages=task_messages(ctx, transcript))


@agent(JobKind.TASK)
def run_task(ctx: JobContext) -> dict[str, Any]:
    transcript: list[Turn] = []
    calculation = precompute(ctx)
    max_steps = ctx.profile.max_steps
    for round_number in range(1, max_steps + 1):
        text = _call(ctx, transcript, calculation)
        answer = parse_answer(text)
        if answer.kind == "final":
            cleaned = clean_reply(answer.text, transcript=ctx.profile.is_transcript)
            if cleaned.removed:
                ctx.note("reply_cleaned", {"removed": cleaned.removed, "kept": cleaned.text})
            if cleaned.text:
                result = {"text": cleaned.text, "model": ctx.profile.model, "rounds": round_number}
                if calculation is not None:
                    result["calculation"] = calculation
                return result
            answer.kind, answer.problem = "junk", "Nothing was left of the answer once cleaned."
        if answer.kind == "junk":
            ctx.note("unusable_answer", {"problem": answer.problem, "answer": text[:2000]})
            transcript.append(
                (
                    "user",
                    f"(Your last answer could not be used: {answer.problem} Answer with a "
                    "tool call or the final answer.)",
                )
            )
            continue
        if ctx.profile.is_transcript:  # its prompt lists no tools: the call is an echo
            ctx.note("unusable_answer", {"problem": NOT_OFFERED, "tool": answer.tool})
            transcript.append(("user", f"(Your last answer could not be used: {NOT_OFFERED})"))
            continue
        result = ctx.call_tool(answer.tool, answer.arguments, enabled=ctx.profile.tools)
        call = json.dumps({"tool": answer.tool, "arguments": answer.arguments})
        told = f"Tool result: {json.dumps(result, default=str)}"
        transcript += [("assistant", call), ("user", told)]
    raise AgentFailure(f"The model gave no usable final answer within {max_steps} model calls.")
