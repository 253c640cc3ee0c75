"""How a built context is sent to the model: one transcript, or chat messages.

The builder (``conversations.context``) decides what goes in; this module only writes it
in the shape the profile's model follows (``AgentProfile.prompt_style``):

* ``transcript``: :func:`transcript`, a plain transcript ending in the answer cue, which
  a base model continues, the retrieved messages last before the new one; the stops in
  :func:`transcript_stops` end the reply where the model would start the next turn.
* ``chat``: chat messages for an instruction-tuned model. One ``system`` message holds
  the system prompt, the tool list, the summary, the line on hidden history and the
  retrieved messages; then the recent messages, the new message and this turn's tool
  exchange as alternating ``user``/``assistant`` messages. Every call carries all of it:
  the runtime keeps nothing between calls.

Both read the context's structured parts (each message with its role); nothing here reads
back text written before.
"""

from collections.abc import Callable
from typing import Any

from agents.actions import ModelCall
from agents.models import AgentProfile
from conversations.context import Context
from conversations.frame import ANSWER_CUE, BLOCK_SEPARATOR, EARLIER_HEADER, RETRIEVED_HEADER
from conversations.history import TOOL_RESULT, retrieved_lines
from conversations.models import Role

# Where a base model starts a turn that is not its own.
TRANSCRIPT_STOPS = ("\nUser:", "\nAssistant:")
# Where a base model starts a line of the retrieved messages (``history.retrieved_lines``).
RETRIEVED_LINE_STOP = "\n#"


def _append(messages: list[dict[str, str]], role: str, content: str) -> None:
    """Adds a message; one of the same role as the last is joined to it (chat templates
    want turns to alternate)."""
    if messages and messages[-1]["role"] == role and role != Role.SYSTEM:
        messages[-1]["content"] += f"\n\n{content}"
    else:
        messages.append({"role": role, "content": content})


def _blocks(context: Context) -> list[str]:
    """The frame's blocks before the messages: head, summary, the line on hidden history."""
    blocks = list(context.head)
    if context.summary:
        blocks.append(context.summary)
    if context.hidden_line:
        blocks.append(context.hidden_line)
    return blocks


def transcript(context: Context) -> str:
    """The context as one flat prompt: blocks separated by blank lines, the transcript one
    message a line, ending in the answer cue.

    The retrieved messages come last, under :data:`EARLIER_HEADER` just before the new
    message: a small base model answers from what it read last (put before the recent
    messages, as a list numbered for the history tools, the Gemma 3 270M answered 21 of
    40 tuning questions whose fact had left the window; here, 33 of 40:
    ``bench/chat_quality.py --pair-set tuning``). A transcript profile has no tools, so
    they are not numbered. All of them are shown, the assistant's too: showing only the
    user's messages got 35 of 40 there, but lost every fact the assistant had said
    (``bench/memory.py``: recall 1.00 -> 0.53)."""
    blocks = _blocks(context)
    recent = [item.line() for item in context.recent]
    tail = [context.message.line(), *(turn.line() for turn in context.exchange), ANSWER_CUE]
    if not context.retrieved:
        blocks.append("\n".join(recent + tail))
        return BLOCK_SEPARATOR.join(blocks)
    if recent:
        blocks.append("\n".join(recent))
    blocks.append("\n".join([EARLIER_HEADER, *retrieved_lines(context.retrieved)]))
    blocks.append("\n".join(tail))
    return BLOCK_SEPARATOR.join(blocks)


def chat_messages(context: Context) -> list[dict[str, str]]:
    """The context as chat messages (see the module docstring): a tool's result is told
    to the model as a user message."""
    system = _blocks(context)
    if context.retrieved:
        system.append("\n".join([RETRIEVED_HEADER, *retrieved_lines(context.retrieved)]))
    messages: list[dict[str, str]] = []
    if system:
        messages.append({"role": Role.SYSTEM, "content": BLOCK_SEPARATOR.join(system)})
    for item in context.recent:
        _append(messages, item.role, item.content)
    _append(messages, context.message.role, context.message.content)
    for turn in context.exchange:
        _append(messages, Role.USER if turn.role == TOOL_RESULT else turn.role, turn.content)
    return messages


def single_message(prompt: str) -> list[dict[str, str]]:
    """A one-off instruction (the summary's) as chat messages."""
    return [{"role": Role.USER, "content": prompt}]


def transcript_stops(options: dict[str, Any], *, retrieved: bool = False) -> dict[str, Any]:
    """``options`` with stops that end a transcript reply at the end of its turn; with
    ``retrieved`` messages shown (lines that start with their number, ``#12 User: ...``),
    also where the model starts another such line."""
    stop = options.get("stop", [])
    stops = [stop] if isinstance(stop, str) else list(stop)
    ends = (*TRANSCRIPT_STOPS, RETRIEVED_LINE_STOP) if retrieved else TRANSCRIPT_STOPS
    stops += [s for s in ends if s not in stops]
    return {**options, "stop": stops}


def model_call(
    profile: AgentProfile,
    context: Context,
    *,
    name: str = "reply",
    options: dict | None = None,
    rewrite: Callable[[str], str] | None = None,
) -> ModelCall:
    """The model call for this context in the profile's prompt style; ``options`` go over
    the profile's (and a transcript's stops); ``rewrite``: see ``ModelCall``."""
    if profile.is_transcript:
        stopped = transcript_stops(profile.options, retrieved=bool(context.retrieved))
        options = {**stopped, **(options or {})}
        return ModelCall(
            name=name, prompt=transcript(context), options=options, cleaned=True, rewrite=rewrite
        )
    return ModelCall(
        name=name,
        messages=chat_messages(context),
        options=dict(options or {}),
        cleaned=True,
        rewrite=rewrite,
    )
