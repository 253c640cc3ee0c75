"""How a job's page shows its model calls' prompts: what changes first, the rest folded.

A model call's prompt repeats what every call of the profile sends (its system text) and
what the job's earlier calls sent. The job's page shows, per ``model_call`` step:

* on the job's first call, the job's own input first: the task, or the chat's new message,
  and the messages retrieval brought back (read from the conversation and the ``context``
  step, never from the prompt's text);
* on a later call, the prompt's lines that the previous call did not have (a tool's
  result, a retry's note), with how many lines it shares with it;
* the whole prompt, folded, without the profile's system text, which is folded apart.
"""

import difflib
from dataclasses import dataclass, field
from typing import Any

from agents.models import Job, Step, StepKind


@dataclass
class PromptView:
    first: bool
    new_lines: str = ""  # later calls: the lines the previous call did not send
    same_lines: int = 0
    previous_index: int | None = None
    body: str = ""  # the prompt without the system text
    scaffold: str = ""  # the profile's system text the prompt starts with
    rest: dict[str, Any] = field(default_factory=dict)  # the step's other inputs
    changes: list[str] = field(default_factory=list)  # options unlike the previous call's


def _text(step: Step) -> str:
    messages = step.input.get("messages")
    if isinstance(messages, list):
        return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)
    prompt = step.input.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def _scaffold(job: Job, text: str) -> str:
    profile = job.profile
    for system in (profile.task_prompt, profile.system_prompt):
        system = (system or "").strip()
        for start in (system, f"[system]\n{system}"):
            if system and text.startswith(start):
                return start
    return ""


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [
        f"{name}: {before.get(name, '-')} \u2192 {after.get(name, '-')}"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def prompt_views(job: Job, steps: list[Step]) -> dict[int, PromptView]:
    """Per model_call step (by its index), how to show its prompt (see the module)."""
    views: dict[int, PromptView] = {}
    previous: tuple[int, list[str]] | None = None
    previous_options: dict[str, Any] = {}
    for step in steps:
        if step.kind != StepKind.MODEL_CALL or not isinstance(step.input, dict):
            continue
        text = _text(step)
        scaffold = _scaffold(job, text)
        body = text[len(scaffold) :].lstrip("\n")
        lines = body.splitlines()
        rest = {k: v for k, v in step.input.items() if k not in ("prompt", "messages")}
        view = PromptView(first=previous is None, body=body, scaffold=scaffold, rest=rest)
        if previous is not None:
            matcher = difflib.SequenceMatcher(None, previous[1], lines, autojunk=False)
            new = [
                line
                for tag, _, _, j1, j2 in matcher.get_opcodes()
                if tag in ("insert", "replace")
                for line in lines[j1:j2]
            ]
            view.new_lines = "\n".join(new)
            view.same_lines = sum(
                j2 - j1 for tag, _, _, j1, j2 in matcher.get_opcodes() if tag == "equal"
            )
            view.previous_index = previous[0]
            view.changes = _changes(previous_options, rest.get("options") or {})
        views[step.index] = view
        previous = (step.index, lines)
        previous_options = rest.get("options") or {}
    return views
