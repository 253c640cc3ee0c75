"""How a built context is sent to the model: one transcript, or chat messages.

The builder (``conversations.context``) decides what goes in; this module only writes it
in the shape the profile's model follows (``AgentProfile.prompt_style``):

* ``transcript``: ``Context.prompt``, a plain transcript ending in the answer cue, which a
  base model continues, the retrieved messages last before the new one; the stops in
  :func:`transcript_stops` end the reply where the model would start the next turn.
* ``chat``: chat messages for an instruction-tuned model. One ``system`` message holds
  the system prompt, the tool list, the summary, the line on hidden history and the
  retrieved messages; then the recent messages, the new message and this turn's tool
  exchange as alternating ``user``/``assistant`` messages. Every call carries all of it:
  the runtime keeps nothing between calls.
"""

from typing import Any

from agents.models import AgentProfile
from conversations.context import (
    ANSWER_CUE,
    BLOCK_SEPARATOR,
    LABELS,
    RETRIEVED_HEADER,
    Context,
)
from conversations.history import retrieved_lines
from conversations.models import Role

# Where a base model starts a turn that is not its own.
TRANSCRIPT_STOPS = ("\nUser:", "\nAssistant:")


def _append(messages: list[dict[str, str]], role: str, content: str) -> None:
    """Adds a message; one of the same role as the last is joined to it (chat templates
    want turns to alternate)."""
    if messages and messages[-1]["role"] == role and role != Role.SYSTEM:
        messages[-1]["content"] += f"\n\n{content}"
    else:
        messages.append({"role": role, "content": content})


def chat_messages(context: Context) -> list[dict[str, str]]:
    """The context as chat messages (see the module docstring)."""
    system = list(context.head)
    if context.summary:
        system.append(context.summary)
    if context.hidden_line:
        system.append(context.hidden_line)
    if context.retrieved:
        system.append("\n".join([RETRIEVED_HEADER, *retrieved_lines(context.retrieved)]))
    messages: list[dict[str, str]] = []
    if system:
        messages.append({"role": Role.SYSTEM, "content": BLOCK_SEPARATOR.join(system)})
    for item in context.recent:
        _append(messages, item.role, item.content)
    for role, content in _tail_turns(context.tail):
        _append(messages, role, content)
    return messages


def _tail_turns(tail: list[str]) -> list[tuple[str, str]]:
    """The tail's lines (the new message, this turn's tool calls and results, the answer
    cue) as (role, content): the cue is dropped, a call is the model's own turn."""
    user, assistant = f"{LABELS[Role.USER]} ", f"{ANSWER_CUE} "
    turns = []
    for index, line in enumerate(tail):
        if index == 0 and line.startswith(user):  # the new message
            turns.append((Role.USER, line[len(user) :]))
        elif line.startswith(assistant):  # the model's tool call
            turns.append((Role.ASSISTANT, line[len(assistant) :]))
        elif line != ANSWER_CUE:  # a tool's result, told to the model
            turns.append((Role.USER, line))
    return turns


def single_message(prompt: str) -> list[dict[str, str]]:
    """A one-off instruction (the summary's) as chat messages."""
    return [{"role": Role.USER, "content": prompt}]


def transcript_stops(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with stops that end a transcript reply at the end of its turn."""
    stop = options.get("stop", [])
    stops = [stop] if isinstance(stop, str) else list(stop)
    stops += [s for s in TRANSCRIPT_STOPS if s not in stops]
    return {**options, "stop": stops}


def model_input(profile: AgentProfile, context: Context) -> dict[str, Any]:
    """The keyword arguments of ``JobContext.call_model`` for this context and profile."""
    if profile.is_transcript:
        return {"prompt": context.prompt, "options": transcript_stops(profile.options)}
    return {"prompt": "", "messages": chat_messages(context)}
