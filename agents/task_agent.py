"""The agent of task jobs: the calculator for arithmetic, else the model, with tools.

1. **Arithmetic first.** With the calculator enabled, the agent reads the task's
   arithmetic itself (``agents.arithmetic.plan``: "add 17 and 25, then multiply by 3",
   "15% of 80", "half of 3 dozen") and works it out step by step, one ``tool_call`` step
   per calculator expression. A task that is nothing but that arithmetic is answered with
   the result, without a model call (``answered_by: "calculator"``, ``verified: true``);
   a step the calculator refuses ends it with an answer that says so.
2. **Word problems.** A task that asks for a quantity around numbers the reader could not
   read ("A box holds 6 eggs. How many eggs are in 7 boxes?") has the model write the
   calculation as one expression, which the calculator works out when it uses only the
   task's numbers (``agents.word_problems``); labelled as the model's reading, unchecked.
3. **Otherwise the model.** Each round is one model call. An answer that asks for a tool
   runs it as a step (when the prompt listed the tools) and feeds the result into the next
   prompt; an empty or unusable answer is asked again with sampling (``retry_options``,
   since greedy decoding repeats itself); after ``profile.max_steps`` model calls without
   a final answer the job fails with that reason. The final answer is cleaned of what the
   model invented around it (``agents.replies``) and labelled as the model's, not checked
   (``answered_by: "model"``, ``verified: false``). A calculation made for a task that
   asks for more than arithmetic is put in the prompt and in ``final_result``.

The prompt starts with the profile's ``task_prompt`` (its ``system_prompt`` when that is
blank), never the chat's example conversation, and is written in the profile's style:

* ``chat`` (instruction-tuned models): chat messages; the system message lists the tools.
* ``transcript`` (base models): one prompt shaped for completion, without a tool list;
  a tool call in the model's answer is not run (nothing offered it: it echoes the task).
"""

import json
from typing import Any

from agents.actions import ModelCall, Note, Steps, ToolCall
from agents.answers import NOT_OFFERED, TOOL_CALL_FORMAT, parse_answer, retry_options
from agents.arithmetic import PREVIOUS, format_value, operand, plan
from agents.context import AgentFailure
from agents.kinds import agent
from agents.models import AgentProfile, Job, JobKind
from agents.replies import clean_reply
from agents.tools import enabled_tools
from agents.word_problems import (
    READING_STOPS,
    READING_TOKENS,
    expression_of,
    is_word_problem,
    reading_prompt,
)

ANSWER_CUE = "Answer:"
# A base model's answer to a task ends where it would start another block.
TASK_STOPS = ["\n\n", "\nTask:", "\nQuestion:"]

# One turn of the exchange after the task: (role, text).
Turn = tuple[str, str]


def _tools_block(profile: AgentProfile) -> str:
    tools = enabled_tools(profile.tools)
    if not tools:
        return ""
    return (
        "You may use these tools. To use one, answer with only this JSON on one line:\n"
        f"{TOOL_CALL_FORMAT}\n"
        + "\n".join(t.describe() for t in tools)
        + "\nOtherwise give the final answer as plain text."
    )


def _system_text(profile: AgentProfile) -> str:
    return (profile.task_prompt or profile.system_prompt).strip()


def _task_lines(job: Job, calculation: dict[str, Any] | None) -> str:
    lines = [f"Task: {job.task}"]
    if calculation is not None and "error" in calculation:  # the model can say why
        lines.append(f"Calculator: {calculation['expression']}: {calculation['error']}")
    elif calculation is not None:
        value = format_value(calculation["value"])
        lines.append(f"Calculator: {calculation['expression']} = {value}")
    return "\n".join(lines)


def task_prompt(job: Job, transcript: list[Turn], calculation: dict[str, Any] | None = None) -> str:
    """The task as one prompt for completion (transcript style: no tool list)."""
    system = _system_text(job.profile)
    parts = [system] if system else []
    parts.append(_task_lines(job, calculation))
    parts.extend(("Tool call: " if role == "assistant" else "") + text for role, text in transcript)
    parts.append(ANSWER_CUE)
    return "\n\n".join(parts)


def task_messages(job: Job, transcript: list[Turn]) -> list[dict[str, str]]:
    """The task as chat messages (chat style: the system message lists the tools)."""
    profile = job.profile
    system = "\n\n".join(p for p in (_system_text(profile), _tools_block(profile)) if p)
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": _task_lines(job, None)})
    messages += [{"role": role, "content": text} for role, text in transcript]
    return messages


def work_out(job: Job) -> Steps:
    """The task's arithmetic worked out with the calculator, one step at a time, and
    whether the task is nothing but that arithmetic: ``(calculation, pure)``. The
    calculation is ``{"expression", "value", "steps"}`` (the last step's expression and
    the result), or ``{"expression", "error", "steps"}`` when the calculator refused a
    step."""
    profile = job.profile
    found = plan(job.task) if "calculator" in profile.tools else None
    if found is None or not (found.pure or profile.is_transcript):
        return None, False  # an instruction-tuned model asks for the calculator itself
    steps: list[dict[str, Any]] = []
    previous: float | None = None
    for template in found.steps:
        expression = template
        if previous is not None:
            expression = template.replace(PREVIOUS, operand(previous))
        outcome = yield ToolCall("calculator", {"expression": expression}, profile.tools)
        if "error" in outcome:
            return {"expression": expression, "error": outcome["error"], "steps": steps}, found.pure
        previous = outcome["result"]["value"]
        steps.append({"expression": expression, "value": previous})
    return {**steps[-1], "steps": steps}, found.pure


def read_word_problem(job: Job) -> Steps:
    """A word problem's answer, its calculation read by the model and worked out by the
    calculator (``agents.word_problems``), labelled as not checked; None when the task is
    not one, the model wrote no usable expression, or the calculator refused it."""
    profile = job.profile
    if not profile.is_transcript or "calculator" not in profile.tools:
        return None  # an instruction-tuned model asks for the calculator itself
    if not is_word_problem(job.task):
        return None
    options = {"stop": READING_STOPS, "num_predict": READING_TOKENS}
    text = yield ModelCall(name="read_arithmetic", prompt=reading_prompt(job.task), options=options)
    expression = expression_of(job.task, text)
    if expression is None:
        yield Note("reading_dropped", {"answer": text[:200]})
        return None
    outcome = yield ToolCall("calculator", {"expression": expression}, profile.tools)
    if "error" in outcome:
        return None
    value = outcome["result"]["value"]
    return {
        "text": format_value(value),
        "answered_by": "model",
        "verified": False,
        "model": profile.model,
        "calculation": {"expression": expression, "value": value, "read_by": "model"},
        "note": f"The model read the task as {expression}; the calculator worked it out. "
        "The reading is not checked.",
    }


def _calculator_answer(calculation: dict[str, Any]) -> dict[str, Any]:
    if "error" in calculation:
        text = f"I cannot work this out: {calculation['error']}"
    else:
        text = format_value(calculation["value"])
    return {"text": text, "answered_by": "calculator", "verified": True, "calculation": calculation}


def _call(
    job: Job,
    transcript: list[Turn],
    calculation: dict[str, Any] | None,
    *,
    retry: bool,
    attempt: int,
) -> Steps:
    """One model call for the task in the profile's prompt style: the model's text; a
    ``retry`` samples, seeded by the call's number (``attempt``)."""
    options: dict[str, Any] = retry_options(attempt) if retry else {}
    profile = job.profile
    if not profile.is_transcript:
        return (yield ModelCall(messages=task_messages(job, transcript), options=options))
    stops = list(profile.options.get("stop") or [])
    stops += [s for s in TASK_STOPS if s not in stops]
    # A base model often starts its answer with a blank line: a blank-line stop would end
    # it before its first word. Such stops end the answer here, after its first word.
    blank = [s for s in stops if not s.strip()]
    prompt = task_prompt(job, transcript, calculation)
    options["stop"] = [s for s in stops if s.strip()]
    text = yield ModelCall(prompt=prompt, options=options)
    text = text.lstrip()
    for stop in blank:
        text = text.split(stop, 1)[0]
    return text


def _final(profile: AgentProfile, text: str) -> Steps:
    cleaned = clean_reply(text, transcript=profile.is_transcript)
    if cleaned.removed:
        yield Note("reply_cleaned", {"removed": cleaned.removed, "kept": cleaned.text})
    return cleaned.text


@agent(JobKind.TASK)
def run_task(job: Job, token: str) -> Steps:
    calculation, pure = yield from work_out(job)
    if calculation is not None and pure:
        return _calculator_answer(calculation)
    read = None if calculation is not None else (yield from read_word_problem(job))
    if read is not None:
        return read
    profile = job.profile
    transcript: list[Turn] = []
    max_steps = profile.max_steps
    retry = False
    for round_number in range(1, max_steps + 1):
        text = yield from _call(job, transcript, calculation, retry=retry, attempt=round_number)
        answer = parse_answer(text)
        if answer.kind == "final":
            final = yield from _final(profile, answer.text)
            if final:
                result = {
                    "text": final,
                    "answered_by": "model",
                    "verified": False,
                    "model": profile.model,
                    "rounds": round_number,
                }
                if calculation is not None:
                    result["calculation"] = calculation
                return result
            answer.kind, answer.problem = "junk", "Nothing was left of the answer once cleaned."
        retry = answer.kind == "junk" or profile.is_transcript
        if answer.kind == "junk":
            yield Note("unusable_answer", {"problem": answer.problem, "answer": text[:2000]})
            if not profile.is_transcript:  # an instruction-tuned model can read why
                told = f"(Your last answer could not be used: {answer.problem} Answer with a "
                transcript.append(("user", told + "tool call or the final answer.)"))
            continue
        if profile.is_transcript:  # its prompt lists no tools: the call is an echo
            yield Note("unusable_answer", {"problem": NOT_OFFERED, "tool": answer.tool})
            continue
        result = yield ToolCall(answer.tool, answer.arguments, profile.tools)
        call = json.dumps({"tool": answer.tool, "arguments": answer.arguments})
        told = f"Tool result: {json.dumps(result, default=str)}"
        transcript += [("assistant", call), ("user", told)]
    raise AgentFailure(f"The model gave no usable final answer within {max_steps} model calls.")
