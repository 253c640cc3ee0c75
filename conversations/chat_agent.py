"""The chat agent: the job of kind ``chat``.

1. The job's user message was stored with the job. If its reply is stored already (the
   job was delivered again after its worker died), that reply is the result.
2. It builds the context (a ``context`` step). When the history does not fit, the agent
   itself loads the older messages that matter for the new message before it calls the
   model: ``search_history`` with the message's keywords, then ``read_history`` around
   the best match (``tool_call`` steps), and builds the context again with them.
3. It calls the model with the finished prompt. An answer that asks for a tool (the
   agents' format, ``{"tool": ..., "arguments": {...}}``) runs it; messages a history
   tool loads join the context, other results are shown after the new message; then the
   model is called again. At most ``profile.max_steps`` model calls; the last one is
   offered no tools. An empty answer is asked again; any other text is the reply (a
   chat reply may well contain braces).
4. It stores the reply once, then, when enough history slid out of the window, folds the
   oldest of it into the rolling summary (a ``model_call`` step named ``summarize``).
"""

import json
from typing import Any

from agents.answers import parse_answer
from agents.context import AgentFailure, JobCancelled, JobContext
from agents.models import StepKind
from conversations import services, summary, tokens
from conversations.context import (
    HISTORY_TOOLS,
    Context,
    ContextOverflow,
    History,
    Item,
    build_context,
)
from conversations.models import Conversation, Message, Role
from conversations.search import keywords
from conversations.selectors import message_of_job
from gateway.errors import ApiError

OWN_SEARCH_LIMIT = 10
NEIGHBOURS = 1  # messages read on each side of the best match
TOOL_RESULT_CHARS = 600


def _result(conversation_id: str, reply: Message) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "message": {"role": Role.ASSISTANT, "content": reply.content, "seq": reply.seq},
    }


def _recount(ctx: JobContext, own: Message) -> int:
    """The user's message counted by the runtime's tokenizer (the view stored the heuristic)."""
    counted = tokens.count(ctx.profile.model, own.content)
    if counted != own.token_estimate:
        Message.objects.filter(pk=own.pk).update(token_estimate=counted)
    return counted


class ChatTurn:
    """The state of one chat job: its message, what was retrieved, the tool exchange."""

    def __init__(self, ctx: JobContext, own: Message) -> None:
        self.ctx = ctx
        self.profile = ctx.profile
        self.conversation = Conversation.objects.get(pk=own.conversation_id)
        self.message = Item(
            seq=own.seq, role=own.role, content=own.content, tokens=_recount(ctx, own)
        )
        self.history = History(own.conversation_id, own.seq)
        self.retrieved: list[Item] = []
        self.model_retrieved = False
        self.exchange: list[str] = []
        self.enabled = list(self.profile.tools)

    # --- Context -----------------------------------------------------------------------------

    def build(self, *, round_number: int, offer_tools: bool, why: str) -> Context:
        with self.ctx.step(
            StepKind.CONTEXT,
            "build_context",
            {"round": round_number, "reason": why, "offer_tools": offer_tools},
        ) as out:
            try:
                context = self._build(offer_tools)
            except ContextOverflow as exc:
                if not self.exchange:
                    raise AgentFailure(str(exc)) from None
                # The tool lines no longer fit: drop them, keep what the tools loaded.
                out["dropped_exchange_lines"] = len(self.exchange)
                self.exchange = []
                context = self._build(offer_tools)
            out.update(context.stats())
            out["search_before"] = context.search_before
            return context

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
        )

    def retrieve(self, search_before: int | None) -> None:
        """The agent's own retrieval, before any model call (see the module docstring)."""
        query = " ".join(keywords(self.message.content))
        if not query or "search_history" not in self.enabled:
            return
        found = self._messages(
            "search_history",
            {"query": query, "limit": OWN_SEARCH_LIMIT, "before_seq": search_before},
        )
        if not found:
            return
        best, others = found[0], found[1:]
        around: list[Item] = []
        if "read_history" in self.enabled:
            before = best.seq + NEIGHBOURS + 1
            if search_before is not None:
                before = min(before, search_before)
            read = self._messages(
                "read_history", {"before_seq": before, "limit": 2 * NEIGHBOURS + 1}
            )
            around = [item for item in read if item.seq != best.seq]
        self._add_retrieved([best, *around, *others])

    def _messages(self, tool: str, arguments: dict[str, Any]) -> list[Item]:
        arguments = {name: value for name, value in arguments.items() if value is not None}
        outcome = self.ctx.call_tool(tool, arguments, enabled=self.enabled)
        result = outcome.get("result") or {}
        return [Item.from_row(row) for row in result.get("messages", [])]

    def _add_retrieved(self, items: list[Item], *, first: bool = False) -> None:
        known = {item.seq for item in self.retrieved}
        new = [item for item in items if item.seq not in known]
        self.retrieved = new + self.retrieved if first else self.retrieved + new

    def prepare(self, *, offer_tools: bool) -> Context:
        """The first prompt: the context, and when the history does not fit, the agent's
        own retrieval and the context again with what it loaded."""
        context = self.build(round_number=1, offer_tools=offer_tools, why="turn")
        if not context.fits:
            self.retrieve(context.search_before)
            if self.retrieved:
                context = self.build(round_number=1, offer_tools=offer_tools, why="retrieved")
        return context

    # --- The model's tool calls ------------------------------------------------------------

    def use_tool(self, name: str, arguments: dict[str, Any]) -> None:
        call = json.dumps({"tool": name, "arguments": arguments})
        outcome = self.ctx.call_tool(name, arguments, enabled=self.enabled)
        if name in HISTORY_TOOLS and "result" in outcome:
            found = [Item.from_row(row) for row in outcome["result"].get("messages", [])]
            self._add_retrieved(found, first=True)
            self.model_retrieved = True
            note = (
                f"Tool result: {len(found)} messages found; those that fit are shown above "
                "under the earlier history."
                if found
                else "Tool result: no messages found."
            )
        else:
            text = json.dumps(outcome, default=str)
            if len(text) > TOOL_RESULT_CHARS:
                text = text[:TOOL_RESULT_CHARS] + " …"
            note = f"Tool result: {text}"
        self.exchange += [f"Assistant: {call}", note]

    # --- Summary ---------------------------------------------------------------------------

    def summarize(self, context: Context) -> None:
        """Folds history that left the window into the summary; never fails the chat."""
        if not summary.summary_due(self.conversation, context, self.message.seq):
            return
        before = min(context.window_start or self.message.seq, self.message.seq)
        request = summary.summary_request(
            profile=self.profile, conversation=self.conversation, before_seq=before
        )
        if request is None:
            return
        try:
            text = self.ctx.call_model(
                request.prompt,
                name="summarize",
                options={"num_predict": request.max_tokens, "stop": summary.SUMMARY_STOP},
            )
        except (ApiError, JobCancelled) as exc:
            self.ctx.note("summary_skipped", {"reason": str(exc) or type(exc).__name__})
            return
        limit = summary.summary_limit(self.profile)
        text = summary.clean_summary(text, limit=limit)
        if not text:
            self.ctx.note("summary_skipped", {"reason": "The model wrote an empty summary."})
            return
        counted = tokens.count(self.profile.model, text)
        if counted > limit:  # the runtime counts more than the heuristic: cut further
            text = summary.clean_summary(text, limit=max(0, 2 * limit - counted))
            counted = tokens.count(self.profile.model, text)
        stored = services.conversation_summary_store(
            conversation=self.conversation,
            summary=text,
            until_seq=request.until_seq,
            summary_tokens=counted,
        )
        self.ctx.note(
            "summary_stored" if stored else "summary_not_stored",
            {"until_seq": request.until_seq, "messages": request.messages, "tokens": counted},
        )


def run_chat(ctx: JobContext) -> dict[str, Any]:
    job = ctx.job
    own = message_of_job(job, Role.USER)
    if own is None:
        raise AgentFailure("The chat job has no user message to answer.")
    stored = message_of_job(job, Role.ASSISTANT)
    if stored is not None:
        ctx.note("reply_already_stored", {"seq": stored.seq})
        return _result(own.conversation_id, stored)

    turn = ChatTurn(ctx, own)
    max_steps = turn.profile.max_steps
    for round_number in range(1, max_steps + 1):
        offer = round_number < max_steps and bool(turn.enabled)
        if round_number == 1:
            context = turn.prepare(offer_tools=offer)
        else:
            context = turn.build(round_number=round_number, offer_tools=offer, why="tool")
        text = ctx.call_model(context.prompt, name="reply")
        answer = parse_answer(text)
        if answer.kind == "tool" and offer:
            turn.use_tool(answer.tool, answer.arguments)
            continue
        if answer.kind == "tool":
            raise AgentFailure("The model asked for a tool on its last allowed call.")
        if not text.strip():
            ctx.note("unusable_answer", {"problem": "The answer was empty."})
            continue
        break
    else:
        raise AgentFailure(f"The model gave no usable answer within {max_steps} model calls.")

    content = text.strip()
    reply = services.message_store_reply(
        job=job,
        token=ctx.token,
        content=content,
        token_estimate=tokens.count(turn.profile.model, content),
    )
    turn.summarize(context)
    return _result(own.conversation_id, reply)
