"""The frame of a chat prompt: the blocks around the messages (system prompt, tool list,
the line on hidden history, the summary's header) and what they cost, for the context
builder (``conversations.context``) and the renderer (``conversations.render``)."""

import re
from collections.abc import Collection

from agents.answers import TOOL_CALL_FORMAT
from agents.models import AgentProfile
from agents.tools import enabled_tools
from conversations.history import label_cost
from conversations.models import Conversation, Role
from conversations.tokens import estimate
from conversations.wording import COMMON, words

SAFETY_MARGIN = 8
BLOCK_SEPARATOR = "\n\n"
BLOCK_COST = 2  # the two newlines between blocks
ANSWER_CUE = "Assistant:"
RETRIEVED_HEADER = "Messages found in the earlier history:"
RECENT_HEADER = "Recent messages:"
EARLIER_HEADER = "Earlier in the conversation:"
HISTORY_TOOLS = ("search_history", "read_history")
# Room kept beside the longest accepted message for one tool call and its result.
TOOL_ROUND_ROOM = 64
TOOLS_INTRO = "The assistant can use tools."
# A line of an example conversation in the system prompt.
EXAMPLE_LINE = re.compile(r"^\s*(?:user|assistant|human|ai)\s*:(.*)$", re.IGNORECASE | re.M)
# A tool's line in :func:`tools_block`: its name.
_TOOL_LINE = re.compile(r"^- (\w+):", re.M)


def listed_tools(profile: AgentProfile, *, history_tools: bool = True) -> list[str]:
    """The names of the tools that :func:`tools_block` lists."""
    names = [n for n in profile.tools if history_tools or n not in HISTORY_TOOLS]
    return [tool.name for tool in enabled_tools(names)]


def tools_block(profile: AgentProfile, *, history_tools: bool = True) -> str:
    tools = enabled_tools(listed_tools(profile, history_tools=history_tools))
    if not tools:
        return ""
    return (
        f"{TOOLS_INTRO} To use one, the assistant answers with only this JSON "
        f"on one line: {TOOL_CALL_FORMAT}\n" + "\n".join(tool.describe() for tool in tools)
    )


def example_facts(system_prompt: str, head: Collection[str] = ()) -> frozenset[str]:
    """What a reply can only have copied from the frame: the uncommon words of the system
    prompt's example conversation (its ``User:``/``Assistant:`` lines), and the names of
    the tools that the tool list in ``head`` (the frame's blocks) describes ("calculator")."""
    lines = " ".join(match.group(1) for match in EXAMPLE_LINE.finditer(system_prompt))
    found = {w for w in words(lines) if w not in COMMON and (len(w) > 2 or w.isdigit())}
    tools = [block for block in head if block.startswith(TOOLS_INTRO)]
    return frozenset(found | {name for block in tools for name in _TOOL_LINE.findall(block)})


def hidden_line(hidden: int, *, tools: bool) -> str:
    more = " The tools search_history and read_history can load them." if tools else ""
    return f"({hidden} earlier messages are not shown here.{more})"


def summary_header(until_seq: int) -> str:
    return f"Summary of the conversation up to message {until_seq}:"


def summary_block(conversation: Conversation) -> str:
    return f"{summary_header(conversation.summary_until_seq)}\n{conversation.summary}"


def frame_blocks(
    profile: AgentProfile, *, offer_tools: bool, history_tools: bool = True
) -> tuple[list[str], int]:
    """The blocks before the transcript and their cost (with the answer cue)."""
    system = profile.system_prompt.strip()
    tools = tools_block(profile, history_tools=history_tools) if offer_tools else ""
    head = [block for block in (system, tools) if block]
    cost = sum(estimate(block) + BLOCK_COST for block in head) + BLOCK_COST
    return head, cost + estimate(ANSWER_CUE)


def message_limit(profile: AgentProfile) -> int:
    """The most tokens a new message may have and still fit with the frame and a tool
    round; a longer one is refused when the chat is started. A transcript profile's
    frame never lists the tools (``chat_agent.run_chat``), so they take no room there."""
    _, frame = frame_blocks(profile, offer_tools=not profile.is_transcript)
    label = label_cost(Role.USER) + 1
    return profile.prompt_budget - SAFETY_MARGIN - frame - label - TOOL_ROUND_ROOM
