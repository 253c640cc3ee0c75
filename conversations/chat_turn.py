"""The state of one chat job and the steps that grow it: the context (a ``context`` step
around the pure builder), the agent's own retrieval and the model's tool calls.

Each step is a request to the runner (``agents.actions``): these functions are generators
that yield them and are sent the answers; they never record anything themselves.
"""

import json
from collections.abc import Generator
from typing import Any

from agents.actions import Action, StepOutput, ToolCall, Work
from agents.context import AgentFailure
from agents.models import AgentProfile, Job, StepKind
from conversations import arrange
from conversations.context import Context, ContextOverflow, History, Item, Turn, build_context
from conversations.frame import HISTORY_TOOLS
from conversations.history import TOOL_RESULT
from conversations.models import Conversation, Message, Role
from conversations.search import keywords

OWN_SEARCH_LIMIT = 10
SEARCH_QUERY_CHARS = 500  # the tool's limit on a query
TOOL_RESULT_CHARS = 600

Steps = Generator[Action, Any, Any]


class ChatTurn:
    """One chat job's state: its message, what was retrieved, this job's tool exchange."""

    def __init__(self, job: Job, conversation: Conversation, own: Message, *, tokens: int) -> None:
        self.job = job
        self.profile: AgentProfile = job.profile
        self.conversation = conversation
        self.message = Item(seq=own.seq, role=own.role, content=own.content, tokens=tokens)
        self.history = History(own.conversation_id, own.seq)
        self.retrieved: list[Item] = []
        self.model_retrieved = False
        self.exchange: list[Turn] = []
        self.enabled = list(self.profile.tools)
        self.focus = keywords(own.content)
        self.now = own.created_at
        self.borrowed = 0  # replies that borrowed from the prompt (``chat_agent``)
        self.stale: set[int] = set()  # what an outdated reply took (``outdated.stale_seqs``)

    # --- Context -----------------------------------------------------------------------------

    def build(self, *, round_number: int, offer_tools: bool, why: str) -> Steps:
        """The context, built in a ``context`` step whose output says what went in."""

        def run(out: StepOutput) -> Context:
            try:
                context = self._build(offer_tools)
            except ContextOverflow as exc:
                if not self.exchange:
                    raise AgentFailure(str(exc)) from None
                # The tool turns no longer fit: drop them, keep what the tools loaded.
                out["dropped_exchange_lines"] = len(self.exchange)
                self.exchange = []
                context = self._build(offer_tools)
            out.update(context.stats())
            out["search_before"] = context.search_before
            return context

        step_input = {"round": round_number, "reason": why, "offer_tools": offer_tools}
        return (yield Work(StepKind.CONTEXT, "build_context", step_input, run))

    def _build(self, offer_tools: bool) -> Context:
        return build_context(
            profile=self.profile,
            conversation=self.conversation,
            message=self.message,
            history=self.history,
            retrieved=self.retrieved,
            exchange=self.exchange,
            offer_tools=offer_tools,
            model_retrieved=self.model_retrieved,
            focus=self.focus,
        )

    def prepare(self, *, offer_tools: bool) -> Steps:
        """The first context, and when the history does not fit, the agent's own retrieval
        and the context again with what it loaded."""
        context = yield from self.build(round_number=1, offer_tools=offer_tools, why="turn")
        if not context.fits:
            yield from self.retrieve(context.search_before)
            if self.retrieved:
                context = yield from self.build(
                    round_number=1, offer_tools=offer_tools, why="retrieved"
                )
        return context

    # --- The agent's own retrieval ------------------------------------------------------------

    def retrieve(self, search_before: int | None) -> Steps:
        """The agent's own retrieval, before any model call: the new message is the query,
        for its words and its meaning; the search itself follows the names of its hits
        when their messages fit the question (``conversations.linked``); each hit brings
        the other half of its exchange."""
        query = self.message.content.strip()[:SEARCH_QUERY_CHARS]
        if not query or "search_history" not in self.enabled:
            return
        found = yield from self._messages(
            {"query": query, "limit": OWN_SEARCH_LIMIT, "before_seq": search_before}
        )
        if not found:
            return
        groups = [[hit] for hit in found]
        arranged = arrange.arrange(self.job.conversation_id, groups, self.now, self.focus)
        self._add_retrieved(arranged)

    def _messages(self, arguments: dict[str, Any]) -> Steps:
        arguments = {name: value for name, value in arguments.items() if value is not None}
        outcome = yield ToolCall("search_history", arguments, self.enabled)
        result = outcome.get("result") or {}
        return [Item.from_row(row) for row in result.get("messages", [])]

    def _add_retrieved(self, items: list[Item], *, first: bool = False) -> None:
        known = {item.seq for item in self.retrieved}
        new = [item for item in items if item.seq not in known]
        self.retrieved = new + self.retrieved if first else self.retrieved + new

    # --- The model's tool calls ------------------------------------------------------------

    def use_tool(self, name: str, arguments: dict[str, Any], *, offered: list[str]) -> Steps:
        """Runs the model's tool call; only a tool of ``offered`` (listed in its prompt) runs.
        The call and what it gave join this job's exchange."""
        outcome = yield ToolCall(name, arguments, offered)
        if name in HISTORY_TOOLS and "result" in outcome:
            found = [Item.from_row(row) for row in outcome["result"].get("messages", [])]
            self._add_retrieved(found, first=True)
            self.model_retrieved = True
            told = (
                f"Tool result: {len(found)} messages found; those that fit are shown above "
                "under the earlier history."
                if found
                else "Tool result: no messages found."
            )
        else:
            text = json.dumps(outcome, default=str)
            if len(text) > TOOL_RESULT_CHARS:
                text = text[:TOOL_RESULT_CHARS] + " …"
            told = f"Tool result: {text}"
        call = json.dumps({"tool": name, "arguments": arguments})
        self.exchange += [Turn(Role.ASSISTANT, call), Turn(TOOL_RESULT, told)]
