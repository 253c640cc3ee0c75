"""What an agent asks of the runner that runs it.

An agent is a generator (``agents.kinds``): it yields these requests and receives each
one's answer, and returns the job's ``final_result``. The runner (``agents.runner``)
carries each request out and records it as a step of the job, checks for a cancel before
every model and tool call, and throws whatever stopped a request (a cancel, a domain
error) back into the agent, which may handle it or let it end the job. The agent itself
never touches the job's bookkeeping.
"""

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any


class StepOutput(dict):
    """The output of a step being recorded (``index``: the step's); ``failed`` marks it
    failed without raising."""

    failed: bool = False
    index: int = 0


@dataclass(frozen=True)
class ModelCall:
    """One stateless model call, recorded as a ``model_call`` step; answered with the
    model's text. With ``messages`` (chat messages) those are sent instead of ``prompt``;
    ``options`` go over the profile's. ``cleaned``: a reply the agent stores cleaned
    (``agents.replies.clean_reply``), whose token events carry the cleaned text; and
    ``rewrite``d, sentence by sentence, when the agent gives a rewrite that it applies to
    what it stores too (``conversations.perspective``)."""

    name: str = "generate"
    prompt: str = ""
    messages: list[dict[str, str]] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    cleaned: bool = False
    rewrite: Callable[[str], str] | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool run as a ``tool_call`` step, only when it is one of ``enabled``; answered
    with ``{"result": ...}`` or ``{"error": "..."}``, never the job's end."""

    name: str
    arguments: dict[str, Any]
    enabled: Sequence[str]


@dataclass(frozen=True)
class Note:
    """A finished ``note`` step: something the job's record should say."""

    name: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Discard:
    """The text of the job's last model call is not what the agent keeps (``reason``: why).
    Its step's output gains ``discarded`` and a ``step`` event says so, so that a client
    that showed the step's tokens takes them back."""

    reason: str


@dataclass(frozen=True)
class Say:
    """Text the agent gives as its reply without the model (a profile's ``unknown_reply``):
    a note step named ``name`` (``data``: its input) whose ``token`` events carry ``text``,
    as a model call's carry what it generates."""

    name: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Work:
    """A step of the agent's own work (building a chat's context): the runner records a
    step of ``kind`` and ``name`` around ``run(output)``, which fills the step's output and
    returns the answer. What ``run`` raises fails the step and goes back to the agent."""

    kind: str
    name: str
    input: dict[str, Any]
    run: Callable[[StepOutput], Any]


Action = ModelCall | ToolCall | Note | Discard | Say | Work
# What an agent is once called with its job and lease token.
Steps = Generator[Action, Any, dict[str, Any]]
