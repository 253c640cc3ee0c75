"""The context builder: which messages go into a chat prompt, within the profile's budget.

The budget is ``context_window - answer_reserve`` minus a small safety margin (a
beginning-of-text token and merges at the seams of the pieces). Pieces are counted by
adding stored counts: each message's ``token_estimate`` (counted once, when stored) plus
the heuristic count of its label and newline; the frame (system prompt, tool list,
headers) by the heuristic, which over-counts (``conversations.tokens``).

What goes in, by priority:

1. the frame, the new message and this turn's tool exchange (required: if they do not
   fit, the chat cannot run);
2. when messages were retrieved (found by the history tools): room for them, up to
   ``RETRIEVAL_SHARE`` of what is left (``MODEL_RETRIEVAL_SHARE`` when the model asked
   for them), guaranteed: the recent messages never crowd them out;
3. the last two messages of the history (the thread of the conversation), within what
   retrieval leaves;
4. the rolling summary, at most ``SUMMARY_SHARE`` of the budget;
5. the retrieved messages, best first, in their room, but those a newer retrieved one
   replaces (``conversations.arrange``; the step lists them under ``replaced``); each
   counted with its ``#seq`` number as the chat style shows it, an upper bound for the
   transcript, which shows none;
6. recent messages, newest first, as many as fit.

A thread message or a retrieved message too long for its room is clipped in the prompt
(never in storage) rather than left out: the prompt shows part of it with a mark saying
it is cut, about how much is missing and how ``read_history`` loads it whole
(``conversations.clipping``); the context step lists what was clipped. Other recent
messages are never split: one that does not fit ends the window. When the whole history
fits, it all goes in and nothing else is needed. Otherwise the prompt says how many
earlier messages are not shown and which tools can load them.

Cost does not grow with the history: the builder reads the newest messages page by page
until the budget is full (index on ``(conversation, seq)``) and nothing else. The number
of messages not shown is the conversation's stored count less a count over the shown
window's index range, never a count over the whole history.

A build runs in phases, each a function below: the fixed part (frame and tail), the
whole history when it fits, otherwise the frame for hidden history, the thread and the
summary, the retrieved messages, the recent messages. The result is structured: the
selected parts, each message with its role (:class:`Context`); ``conversations.render``
writes them in the profile's prompt style, once.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.models import AgentProfile
from conversations.clipping import clip
from conversations.frame import (
    BLOCK_COST,
    HISTORY_TOOLS,
    RECENT_HEADER,
    RETRIEVED_HEADER,
    SAFETY_MARGIN,
    frame_blocks,
    hidden_line,
    listed_tools,
    summary_block,
    summary_header,
)
from conversations.history import LABELS, History, Item, Turn
from conversations.models import Conversation
from conversations.tokens import estimate

__all__ = ["LABELS", "Context", "ContextOverflow", "History", "Item", "Turn", "build_context"]

SUMMARY_SHARE = 0.15
RETRIEVAL_SHARE = 0.35
MODEL_RETRIEVAL_SHARE = 0.5
MUST_KEEP_RECENT = 2


class ContextOverflow(Exception):
    """The new message and the frame alone exceed the budget."""


@dataclass
class Context:
    """A built context: what was selected and what went in (``stats()`` is recorded as a
    step). ``conversations.render`` writes it as a prompt.

    The selected parts, in prompt order: ``head`` (system prompt, tool list),
    ``summary`` (the summary block or ""), ``hidden_line`` (what is not shown, "" when
    everything fits), ``retrieved`` (best first), ``recent`` (oldest first), the new
    ``message`` and this job's tool ``exchange``.
    """

    budget: int
    used: int
    fits: bool
    recent: list[Item]
    message: Item
    exchange: list[Turn] = field(default_factory=list)
    retrieved: list[Item] = field(default_factory=list)
    summary_tokens: int = 0
    hidden: int = 0
    search_before: int | None = None
    frame_tokens: int = 0
    head: list[str] = field(default_factory=list)
    summary: str = ""
    hidden_line: str = ""
    # The tools the prompt lists: the only ones a model's answer may call.
    tools: list[str] = field(default_factory=list)
    # Retrieved messages left out because a newer one replaces them (``arrange``).
    replaced: list[Item] = field(default_factory=list)

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
            "replaced": [{"seq": item.seq, "by": item.replaced_by} for item in self.replaced],
            "clipped": [
                {
                    "seq": item.seq,
                    "part": part,
                    "tokens": item.clipped_from,
                    "shown_tokens": item.tokens,
                }
                for part, items in (("recent", self.recent), ("retrieved", self.retrieved))
                for item in items
                if item.clipped_from
            ],
            "hidden_messages": self.hidden,
            "window_start": self.window_start,
            "whole_history": self.fits,
        }


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


# --- The phases of a build ----------------------------------------------------------------


@dataclass
class _Fixed:
    """What every prompt of this turn needs: the frame, the tail and, when history is
    hidden, the line that says so."""

    head: list[str]
    message: Item
    exchange: list[Turn]
    cost: int
    frame_cost: int
    tools: bool = False
    listed: list[str] = field(default_factory=list)


def _require(fixed: int, budget: int) -> None:
    if fixed > budget:
        raise ContextOverflow(
            f"The message and the prompt frame need {fixed} tokens; the budget is {budget}."
        )


def _fixed_part(
    profile: AgentProfile, message: Item, exchange: Sequence[Turn], offer_tools: bool, budget: int
) -> _Fixed:
    """The frame without the history tools (while the whole history fits, they have
    nothing to load) and the tail: the new message, the tool exchange (the answer cue is
    counted with the frame)."""
    tail_cost = message.cost() + sum(turn.cost() for turn in exchange)
    head, frame = frame_blocks(profile, offer_tools=offer_tools, history_tools=False)
    _require(frame + tail_cost, budget)
    listed = listed_tools(profile, history_tools=False) if offer_tools else []
    return _Fixed(
        head=head,
        message=message,
        exchange=list(exchange),
        cost=frame + tail_cost,
        frame_cost=frame,
        listed=listed,
    )


def _hidden_part(profile: AgentProfile, fixed: _Fixed, offer_tools: bool, budget: int) -> _Fixed:
    """Not everything fits: offer the history tools if there is room, and reserve the
    line that says how many messages are not shown."""
    tail_cost = fixed.cost - fixed.frame_cost
    tools = offer_tools and bool(set(HISTORY_TOOLS) & set(profile.tools))
    hidden_cost = estimate(hidden_line(10**9, tools=tools)) + BLOCK_COST
    head, frame = fixed.head, fixed.frame_cost
    with_tools = frame_blocks(profile, offer_tools=True)
    if tools and with_tools[1] + tail_cost + hidden_cost <= budget:
        head, frame = with_tools
    else:
        tools = False
        hidden_cost = estimate(hidden_line(10**9, tools=False)) + BLOCK_COST
    cost = frame + tail_cost + hidden_cost
    _require(cost, budget)
    listed = listed_tools(profile) if tools else fixed.listed
    return _Fixed(
        head=head,
        message=fixed.message,
        exchange=fixed.exchange,
        cost=cost,
        frame_cost=frame,
        tools=tools,
        listed=listed,
    )


def _summary_cost(conversation: Conversation, budget: int, remaining: int) -> int:
    """The cost of the summary block when it fits its share, else 0."""
    if not (conversation.summary and conversation.summary_until_seq):
        return 0
    header = estimate(summary_header(conversation.summary_until_seq)) + 1
    text = max(estimate(conversation.summary), conversation.summary_tokens)
    cost = header + text + BLOCK_COST
    return cost if cost <= min(int(budget * SUMMARY_SHARE), remaining) else 0


def _retrieval_headers() -> int:
    """What showing retrieved messages adds besides them, in either prompt style: the chat
    style's header in the system message, the transcript's header and its two blank lines
    (less than the first, which is the bound)."""
    return estimate(RETRIEVED_HEADER) + estimate(RECENT_HEADER) + BLOCK_COST + 1


def _unique(retrieved: Sequence[Item], own_seq: int) -> list[Item]:
    """The retrieved messages once each, but those a newer one replaces."""
    seen: set[int] = {own_seq}
    unique = []
    for item in retrieved:
        if item.seq not in seen and item.replaced_by is None:
            unique.append(item)
            seen.add(item.seq)
    return unique


def _choose_retrieved(
    retrieved: Sequence[Item], share: int, focus: Sequence[str] = (), tool: bool = True
) -> list[Item]:
    """The retrieved messages, best first, that fit in ``share`` with their headers; one
    too long for the room left is clipped to it."""
    used = _retrieval_headers()
    chosen: list[Item] = []
    for item in retrieved:
        cost = item.cost(numbered=True)
        if used + cost > share:
            item = clip(item, share - used, numbered=True, focus=focus, tool=tool)
            if item is None:
                continue
            cost = item.cost(numbered=True)
        chosen.append(item)
        used += cost
    return chosen


def _thread(
    items: Sequence[Item], room: int, focus: Sequence[str] = (), tool: bool = True
) -> list[Item]:
    """The last messages, newest first, whole while they fit; the first that does not
    is clipped to the room left (when enough of it remains) and ends the thread."""
    taken: list[Item] = []
    for item in items:
        if item.cost() <= room:
            taken.append(item)
            room -= item.cost()
            continue
        clipped = clip(item, room, numbered=False, focus=focus, tool=tool)
        if clipped is not None:
            taken.append(clipped)
        break
    return taken


def _retrieved_cost(chosen: Sequence[Item]) -> int:
    return (_total(chosen, numbered=True) + _retrieval_headers()) if chosen else 0


def _fill_recent(
    chosen: list[Item], thread: list[Item], rest: list[Item], avail: int, own_seq: int
) -> tuple[list[Item], list[Item], int]:
    """Recent messages take what retrieval leaves; retrieved messages they show anyway
    are dropped. Returns (retrieved, recent newest first, the lowest seq shown)."""
    while True:
        shown = thread + _prefix(rest, avail - _retrieved_cost(chosen), Item.cost)
        floor = min((item.seq for item in shown), default=own_seq)
        if not any(item.seq >= floor for item in chosen):
            return chosen, shown, floor
        chosen = [item for item in chosen if item.seq < floor]


def _whole_history(fixed: _Fixed, recent: list[Item], budget: int) -> Context:
    return Context(
        budget=budget,
        used=fixed.cost + _total(recent),
        fits=True,
        recent=recent[::-1],
        message=fixed.message,
        exchange=fixed.exchange,
        frame_tokens=fixed.frame_cost,
        head=fixed.head,
        tools=fixed.listed,
    )


def build_context(
    *,
    profile: AgentProfile,
    conversation: Conversation,
    message: Item,
    history: History,
    retrieved: Sequence[Item] = (),
    exchange: Sequence[Turn] = (),
    offer_tools: bool = True,
    model_retrieved: bool = False,
    focus: Sequence[str] = (),
) -> Context:
    """Chooses what goes into the prompt for ``message`` (see the module docstring).

    ``retrieved`` are older messages loaded by the history tools, best first;
    ``exchange`` this job's tool calls and results, after the new message;
    ``focus`` the question's keywords: where a clipped message's window starts."""
    budget = profile.prompt_budget - SAFETY_MARGIN
    fixed = _fixed_part(profile, message, exchange, offer_tools, budget)
    recent, whole = history.take(budget - fixed.cost, keep=MUST_KEEP_RECENT)
    if whole:
        return _whole_history(fixed, recent, budget)

    fixed = _hidden_part(profile, fixed, offer_tools, budget)
    remaining = budget - fixed.cost
    share_of = MODEL_RETRIEVAL_SHARE if model_retrieved else RETRIEVAL_SHARE
    # Retrieval's room comes first, up to its share: long recent messages cannot take it.
    retrieved_all, retrieved = retrieved, _unique(retrieved, message.seq)
    reserve = min(int(remaining * share_of), _retrieved_cost(retrieved))
    thread = _thread(recent[:MUST_KEEP_RECENT], remaining - reserve, focus, fixed.tools)
    remaining -= _total(thread)
    summary_cost = _summary_cost(conversation, budget, remaining - reserve)
    avail = remaining - summary_cost
    rest = recent[len(thread) :]

    # Older messages are searched below the window that recent messages keep anyway.
    kept = thread + _prefix(rest, avail - int(avail * share_of), Item.cost)
    search_before = min((item.seq for item in kept), default=history.own_seq)

    chosen = _choose_retrieved(retrieved, reserve, focus, fixed.tools)
    chosen, shown, floor = _fill_recent(chosen, thread, rest, avail, history.own_seq)
    hidden = max(0, history.older_than(floor) - len(chosen))
    return Context(
        budget=budget,
        used=fixed.cost + summary_cost + _total(shown) + _retrieved_cost(chosen),
        fits=False,
        recent=shown[::-1],
        message=fixed.message,
        exchange=fixed.exchange,
        retrieved=sorted(chosen, key=lambda item: (-item.rank, item.seq)),
        summary_tokens=summary_cost,
        hidden=hidden,
        search_before=search_before,
        frame_tokens=fixed.frame_cost,
        head=fixed.head,
        summary=summary_block(conversation) if summary_cost else "",
        hidden_line=hidden_line(hidden, tools=fixed.tools),
        tools=fixed.listed,
        replaced=[item for item in retrieved_all if item.replaced_by is not None],
    )
