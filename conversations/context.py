"""The context builder: which messages go into a chat prompt, within the profile's budget.

The budget is ``context_window - answer_reserve`` minus a small safety margin (a
beginning-of-text token and merges at the seams of the pieces). Pieces are counted by
adding stored counts: each message's ``token_estimate`` (counted once, when stored) plus
the heuristic count of its label and newline; the frame (system prompt, tool list,
headers) by the heuristic, which over-counts (``conversations.tokens``).

What goes in, by priority:

1. the frame, the new message and this turn's tool exchange (required: if they do not
   fit, the chat cannot run);
2. the last two messages of the history (the thread of the conversation);
3. the rolling summary, at most ``SUMMARY_SHARE`` of the budget;
4. retrieved older messages (found by the history tools), at most ``RETRIEVAL_SHARE`` of
   what is left (``MODEL_RETRIEVAL_SHARE`` when the model asked for them), best first;
5. recent messages, newest first, as many as fit.

Messages are never split: a message that does not fit is left out whole. When the whole
history fits, it all goes in and nothing else is needed. Otherwise the prompt says how
many earlier messages are not shown and which tools can load them.

Cost does not grow with the history: the builder reads the newest messages page by page
until the budget is full (index on ``(conversation, seq)``) and nothing else. The number
of messages not shown is the conversation's stored count less a count over the shown
window's index range, never a count over the whole history.
"""

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.answers import TOOL_CALL_FORMAT
from agents.models import AgentProfile
from agents.tools import enabled_tools
from conversations import selectors
from conversations.models import Conversation, Role
from conversations.tokens import estimate

SAFETY_MARGIN = 8
SUMMARY_SHARE = 0.15
RETRIEVAL_SHARE = 0.35
MODEL_RETRIEVAL_SHARE = 0.5
MUST_KEEP_RECENT = 2
BLOCK_SEPARATOR = "\n\n"
BLOCK_COST = 2  # the two newlines between blocks
LABELS = {Role.USER: "User:", Role.ASSISTANT: "Assistant:", Role.SYSTEM: "System:"}
ANSWER_CUE = "Assistant:"
RETRIEVED_HEADER = "Messages found in the earlier history:"
RECENT_HEADER = "Recent messages:"
HISTORY_TOOLS = ("search_history", "read_history")
# Room kept beside the longest accepted message for one tool call and its result.
TOOL_ROUND_ROOM = 64


class ContextOverflow(Exception):
    """The new message and the frame alone exceed the budget."""


def _label(role: str) -> str:
    return LABELS.get(role, f"{role.title()}:")


@functools.cache
def _label_cost(role: str) -> int:
    return estimate(_label(role))


@dataclass(frozen=True)
class Item:
    """A message as the builder sees it."""

    seq: int
    role: str
    content: str
    tokens: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Item":
        tokens = row.get("token_estimate") or row.get("tokens") or estimate(row["content"])
        return cls(seq=row["seq"], role=row["role"], content=row["content"], tokens=tokens)

    def line(self, *, numbered: bool = False) -> str:
        label = _label(self.role)
        prefix = f"#{self.seq} {label}" if numbered else label
        return f"{prefix} {self.content}"

    def cost(self, *, numbered: bool = False) -> int:
        """Its tokens with its label and newline; ``numbered``: with ``#<seq> `` too."""
        label = _label_cost(self.role) + 1  # +1: its newline
        if numbered:  # '#' and one token per digit
            label += 1 + len(str(self.seq))
        return self.tokens + label


class History:
    """The messages a chat may show, newest first, read a page at a time when needed:
    those before its own message (later ones belong to later chats)."""

    FIRST_PAGE = 48
    MAX_PAGE = 256

    def __init__(self, conversation_id: str, own_seq: int) -> None:
        self.conversation_id = conversation_id
        self.own_seq = own_seq
        self._items: list[Item] = []
        self._cursor: int | None = own_seq
        self._page = self.FIRST_PAGE
        self.pages_read = 0

    def older_than(self, seq: int) -> int:
        return selectors.messages_older_than(conversation_id=self.conversation_id, seq=seq)

    def _fetch(self) -> None:
        rows = selectors.messages_before(
            conversation_id=self.conversation_id, before_seq=self._cursor, limit=self._page
        )
        self.pages_read += 1
        self._items.extend(Item.from_row(row) for row in rows)
        self._cursor = rows[-1]["seq"] if len(rows) == self._page else None
        self._page = min(self._page * 2, self.MAX_PAGE)

    def take(self, budget: int) -> tuple[list[Item], bool]:
        """The newest messages whose costs add up to at most ``budget`` (newest first), and
        whether they are the whole visible history."""
        used, index = 0, 0
        while True:
            if index == len(self._items):
                if self._cursor is None:
                    return self._items[:index], True
                self._fetch()
                continue
            cost = self._items[index].cost()
            if used + cost > budget:
                return self._items[:index], False
            used += cost
            index += 1


@dataclass
class Context:
    """A built prompt and what went into it (``stats()`` is recorded as a step)."""

    prompt: str
    budget: int
    used: int
    fits: bool
    recent: list[Item]
    retrieved: list[Item] = field(default_factory=list)
    summary_tokens: int = 0
    hidden: int = 0
    search_before: int | None = None
    frame_tokens: int = 0

    @property
    def window_start(self) -> int | None:
        return min((item.seq for item in self.recent), default=None)

    def stats(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "used_tokens": self.used,
            "frame_tokens": self.frame_tokens,
            "summary_tokens": self.summary_tokens,
            "recent_messages": len(self.recent),
            "recent_tokens": sum(item.cost() for item in self.recent),
            "retrieved_messages": len(self.retrieved),
            "retrieved_tokens": sum(item.cost(numbered=True) for item in self.retrieved),
            "retrieved_seqs": [item.seq for item in self.retrieved],
            "hidden_messages": self.hidden,
            "window_start": self.window_start,
            "whole_history": self.fits,
        }


def tools_block(profile: AgentProfile, *, history_tools: bool = True) -> str:
    names = [n for n in profile.tools if history_tools or n not in HISTORY_TOOLS]
    tools = enabled_tools(names)
    if not tools:
        return ""
    return (
        "The assistant can use tools. To use one, the assistant answers with only this JSON "
        f"on one line: {TOOL_CALL_FORMAT}\n" + "\n".join(tool.describe() for tool in tools)
    )


def _hidden_line(hidden: int, *, tools: bool) -> str:
    more = " The tools search_history and read_history can load them." if tools else ""
    return f"({hidden} earlier messages are not shown here.{more})"


def summary_header(until_seq: int) -> str:
    return f"Summary of the conversation up to message {until_seq}:"


def summary_block(conversation: Conversation) -> str:
    return f"{summary_header(conversation.summary_until_seq)}\n{conversation.summary}"


def _frame(
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
    round; a longer one is refused when the chat is started."""
    _, frame = _frame(profile, offer_tools=True)
    label = _label_cost(Role.USER) + 1
    return profile.prompt_budget - SAFETY_MARGIN - frame - label - TOOL_ROUND_ROOM


def _prefix(items: Sequence[Item], budget: int, cost: Callable[[Item], int]) -> list[Item]:
    """The leading items whose costs add up to at most ``budget``."""
    taken, used = [], 0
    for item in items:
        if used + cost(item) > budget:
            break
        taken.append(item)
        used += cost(item)
    return taken


def _total(items: Sequence[Item], *, numbered: bool = False) -> int:
    return sum(item.cost(numbered=numbered) for item in items)


def build_context(
    *,
    profile: AgentProfile,
    conversation: Conversation,
    message: Item,
    history: History,
    retrieved: Sequence[Item] = (),
    exchange: Sequence[str] = (),
    offer_tools: bool = True,
    model_retrieved: bool = False,
) -> Context:
    """Builds the prompt for ``message`` (see the module docstring for the rules).

    ``retrieved`` are older messages loaded by the history tools, best first;
    ``exchange`` the lines of this turn's tool calls and results, after the new message.
    """
    budget = profile.prompt_budget - SAFETY_MARGIN
    tail = [message.line(), *exchange, ANSWER_CUE]
    tail_cost = message.cost() + sum(estimate(line) + 1 for line in exchange)
    # While the whole history fits, the history tools have nothing to load: not offered.
    head, frame = _frame(profile, offer_tools=offer_tools, history_tools=False)
    fixed = frame + tail_cost
    if fixed > budget:
        raise ContextOverflow(
            f"The message and the prompt frame need {fixed} tokens; the budget is {budget}."
        )
    recent, whole = history.take(budget - fixed)
    if whole:
        lines = [item.line() for item in reversed(recent)] + tail
        prompt = BLOCK_SEPARATOR.join([*head, "\n".join(lines)])
        return Context(
            prompt=prompt,
            budget=budget,
            used=fixed + _total(recent),
            fits=True,
            recent=recent[::-1],
            frame_tokens=frame,
        )

    # Not everything fits: offer the history tools if there is room, and reserve the line
    # that says how many messages are not shown.
    tools = offer_tools and bool(set(HISTORY_TOOLS) & set(profile.tools))
    hidden_cost = estimate(_hidden_line(10**9, tools=tools)) + BLOCK_COST
    if tools and _frame(profile, offer_tools=True)[1] + tail_cost + hidden_cost <= budget:
        head, frame = _frame(profile, offer_tools=True)
    else:
        tools = False
        hidden_cost = estimate(_hidden_line(10**9, tools=False)) + BLOCK_COST
    fixed = frame + tail_cost + hidden_cost
    if fixed > budget:
        raise ContextOverflow(
            f"The message and the prompt frame need {fixed} tokens; the budget is {budget}."
        )
    remaining = budget - fixed
    # Keep the thread, then add the summary.
    must = _prefix(recent[:MUST_KEEP_RECENT], remaining, Item.cost)
    remaining -= _total(must)
    summary_cost = 0
    if conversation.summary and conversation.summary_until_seq:
        header = estimate(summary_header(conversation.summary_until_seq)) + 1
        text = max(estimate(conversation.summary), conversation.summary_tokens)
        cost = header + text + BLOCK_COST
        if cost <= min(int(budget * SUMMARY_SHARE), remaining):
            summary_cost = cost
    avail = remaining - summary_cost
    rest = recent[len(must) :]

    # Older messages are searched below the window that recent messages keep anyway.
    share_of = MODEL_RETRIEVAL_SHARE if model_retrieved else RETRIEVAL_SHARE
    share = int(avail * share_of)
    kept = must + _prefix(rest, avail - share, Item.cost)
    search_before = min((item.seq for item in kept), default=history.own_seq)

    headers = estimate(RETRIEVED_HEADER) + estimate(RECENT_HEADER) + BLOCK_COST + 1
    chosen: list[Item] = []
    seen: set[int] = set()
    if retrieved and share > headers:
        used = headers
        for item in retrieved:
            cost = item.cost(numbered=True)
            if item.seq in seen or item.seq == message.seq or used + cost > share:
                continue
            chosen.append(item)
            seen.add(item.seq)
            used += cost
    while True:  # recent messages take what retrieval leaves; drop retrieved they show
        spent = (_total(chosen, numbered=True) + headers) if chosen else 0
        shown = must + _prefix(rest, avail - spent, Item.cost)
        floor = min((item.seq for item in shown), default=history.own_seq)
        overlap = [item for item in chosen if item.seq >= floor]
        if not overlap:
            break
        chosen = [item for item in chosen if item.seq < floor]

    hidden = max(0, history.older_than(floor) - len(chosen))
    blocks = list(head)
    if summary_cost:
        blocks.append(summary_block(conversation))
    blocks.append(_hidden_line(hidden, tools=tools))
    lines = [item.line() for item in reversed(shown)] + tail
    if chosen:
        chosen.sort(key=lambda item: item.seq)
        blocks.append("\n".join([RETRIEVED_HEADER, *(i.line(numbered=True) for i in chosen)]))
        lines.insert(0, RECENT_HEADER)
    blocks.append("\n".join(lines))
    used = (
        fixed
        + summary_cost
        + _total(shown)
        + ((_total(chosen, numbered=True) + headers) if chosen else 0)
    )
    return Context(
        prompt=BLOCK_SEPARATOR.join(blocks),
        budget=budget,
        used=used,
        fits=False,
        recent=shown[::-1],
        retrieved=chosen,
        summary_tokens=summary_cost,
        hidden=hidden,
        search_before=search_before,
        frame_tokens=frame,
    )
