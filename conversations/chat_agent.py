"""The chat agent: the job of kind ``chat``.

1. The job's user message was stored with the job. If its reply is stored already (the
   job was delivered again after its worker died), that reply is the result.
2. It builds the context (a ``context`` step). When the history does not fit, the agent
   itself loads the older messages that matter for the new message before it calls the
   model: ``search_history`` with the message (its words and its meaning; hits below
   the relevance floor are left out, and the step says why), each hit with the other
   half of its exchange, then a second, bounded ``search_history`` round for the names
   the best hits mention (``tool_call`` steps); ``conversations.arrange`` dates, ranks
   and marks them, and the context is built again with them.
3. It calls the model with the finished context, written in the profile's prompt style
   (``conversations.render``: a transcript for a base model, which lists no tools, or
   chat messages for an instruction-tuned one). An answer that asks for a tool (the
   agents' format, ``{"tool": ..., "arguments": {...}}``) runs it when the prompt listed
   the tools (a base model's transcript lists none: its tool call is an echo of the
   conversation, not run, and asked again); messages a history
   tool loads join the context, other results are shown after the new message; then the
   model is called again. At most ``profile.max_steps`` model calls; the last one is
   offered no tools. Any other text is the reply, cleaned of what the model invented
   around it (``agents.replies``; the raw text stays in the ``model_call`` step); a reply
   that is empty once cleaned is asked again.
4. It stores the reply once, then, when enough history slid out of the window, folds the
   oldest of it into the rolling summary (a ``model_call`` step named ``summarize``).
"""

import json
import time
from typing import Any

from agents.answers import NOT_OFFERED, RETRY_OPTIONS, parse_answer
from agents.context import AgentFailure, JobCancelled, JobContext
from agents.kinds import agent
from agents.models import JobKind, StepKind
from agents.replies import clean_reply
from conversations import arrange, entities, render, services, summary, tokens, vectors
from conversations.context import (
    HISTORY_TOOLS,
    Context,
    ContextOverflow,
    History,
    Item,
    build_context,
)
from conversations.models import Message, Role
from conversations.search import keywords
from conversations.selectors import conversation_get, messages_of_job
from core.exceptions import DomainError
from gateway import embeddings

OWN_SEARCH_LIMIT = 10
SEARCH_QUERY_CHARS = 500  # the tool's limit on a query
# The second round: names found in the best hits, searched for by their words, when the
# first round left time (its budget is the first round's).
ENTITY_HITS = 2
MAX_NAMES = 2
SECOND_ROUND_LIMIT = 2
SECOND_ROUND_AFTER = 1.0
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
        services.message_set_token_count(message_id=own.pk, tokens=counted)
    return counted


class ChatTurn:
    """The state of one chat job: its message, what was retrieved, the tool exchange."""

    def __init__(self, ctx: JobContext, own: Message) -> None:
        self.ctx = ctx
        self.profile = ctx.profile
        self.conversation = conversation_get(own.conversation_id)
        self.message = Item(
            seq=own.seq, role=own.role, content=own.content, tokens=_recount(ctx, own)
        )
        self.history = History(own.conversation_id, own.seq)
        self.retrieved: list[Item] = []
        self.model_retrieved = False
        self.exchange: list[str] = []
        self.enabled = list(self.profile.tools)
        self.focus = keywords(own.content)
        self.now = own.created_at

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
            focus=self.focus,
        )

    def retrieve(self, search_before: int | None) -> None:
        """The agent's own retrieval, before any model call (see the module docstring):
        the new message is the query, for its words and its meaning; each hit brings the
        other half of its exchange; the names in the best hits lead to a second round."""
        query = self.message.content.strip()[:SEARCH_QUERY_CHARS]
        if not query or "search_history" not in self.enabled:
            return
        started = time.monotonic()
        found = self._messages(
            "search_history",
            {"query": query, "limit": OWN_SEARCH_LIMIT, "before_seq": search_before},
        )
        if not found:
            return
        groups = [[hit] for hit in found]
        paired = len(groups)  # the second round's hits come alone
        names = entities.names([hit.content for hit in found[:ENTITY_HITS]], exclude=query)
        if names and time.monotonic() - started < SECOND_ROUND_AFTER:
            groups += self._second_round(names[:MAX_NAMES], search_before, found)
        conversation_id = self.ctx.job.conversation_id
        self._add_retrieved(
            arrange.arrange(conversation_id, groups, self.now, self.focus, paired=paired)
        )

    def _second_round(
        self, names: list[str], search_before: int | None, found: list[Item]
    ) -> list[list[Item]]:
        """Messages that name what the first round's best hits name (bounded)."""
        seen = {item.seq for item in found}
        groups = []
        for name in names:
            hits = self._messages(
                "search_history",
                {"query": name, "limit": SECOND_ROUND_LIMIT, "before_seq": search_before,
                 "mode": "text"},
            )  # fmt: skip
            groups += [[hit] for hit in hits if hit.seq not in seen]
            seen.update(hit.seq for hit in hits)
        return groups

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

    def use_tool(self, name: str, arguments: dict[str, Any], *, offered: list[str]) -> None:
        """Runs the model's tool call; only a tool of ``offered`` (listed in its prompt) runs."""
        call = json.dumps({"tool": name, "arguments": arguments})
        outcome = self.ctx.call_tool(name, arguments, enabled=offered)
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
        chat = None if self.profile.is_transcript else render.single_message(request.prompt)
        try:
            text = self.ctx.call_model(
                request.prompt,
                name="summarize",
                options={"num_predict": request.max_tokens, "stop": summary.SUMMARY_STOP},
                messages=chat,
            )
        except (DomainError, JobCancelled) as exc:
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


def embed_messages(ctx: JobContext, messages: list[Message]) -> None:
    """Stores the messages' vectors (in the worker, in one batch). When the embedder is down
    the chat goes on; the scheduled catch-up embeds the messages later."""
    if embeddings.model_id() is None:
        return
    try:
        vectors.messages_embed_loaded(messages)
    except embeddings.EmbeddingUnavailable as exc:
        ctx.note("embedding_skipped", {"seqs": [m.seq for m in messages], "reason": str(exc)})


@agent(JobKind.CHAT)
def run_chat(ctx: JobContext) -> dict[str, Any]:
    job = ctx.job
    messages = messages_of_job(job)
    own = messages.get(Role.USER)
    if own is None:
        raise AgentFailure("The chat job has no user message to answer.")
    stored = messages.get(Role.ASSISTANT)
    if stored is not None:
        ctx.note("reply_already_stored", {"seq": stored.seq})
        return _result(own.conversation_id, stored)

    turn = ChatTurn(ctx, own)
    # Findable by meaning from now on, not only once the reply is stored: the vector is
    # the one its own search uses as the query.
    embed_messages(ctx, [own])
    max_steps = turn.profile.max_steps
    retry = False
    for round_number in range(1, max_steps + 1):
        # Only the tools the prompt lists (``context.tools``) may run: a base model gets no
        # tool list, so a tool call in its answer is an echo of the conversation.
        offer = round_number < max_steps and bool(turn.enabled)
        listed = offer and not turn.profile.is_transcript
        if round_number == 1:
            context = turn.prepare(offer_tools=listed)
        else:
            context = turn.build(round_number=round_number, offer_tools=listed, why="tool")
        inputs = render.model_input(turn.profile, context)
        if retry:  # greedy decoding would give the same unusable answer again
            inputs["options"] = {**inputs.get("options", {}), **RETRY_OPTIONS}
        text = ctx.call_model(name="reply", **inputs)
        answer = parse_answer(text)
        if answer.kind == "tool" and context.tools:
            turn.use_tool(answer.tool, answer.arguments, offered=context.tools)
            continue
        if answer.kind == "tool" and (offer or turn.profile.is_transcript):
            ctx.note("unusable_answer", {"problem": NOT_OFFERED, "tool": answer.tool})
            retry = True
            continue
        if answer.kind == "tool":
            raise AgentFailure("The model asked for a tool on its last allowed call.")
        cleaned = clean_reply(text, transcript=turn.profile.is_transcript)
        if cleaned.removed:
            ctx.note("reply_cleaned", {"removed": cleaned.removed, "kept": cleaned.text})
        if not cleaned.text:
            problem = (
                "The answer was empty."
                if not text.strip()
                else "Nothing was left of the answer once cleaned."
            )
            ctx.note("unusable_answer", {"problem": problem})
            retry = True
            continue
        break
    else:
        raise AgentFailure(f"The model gave no usable answer within {max_steps} model calls.")

    content = cleaned.text
    reply = services.message_store_reply(
        job=job,
        token=ctx.token,
        content=content,
        token_estimate=tokens.count(turn.profile.model, content),
    )
    embed_messages(ctx, [reply])
    turn.summarize(context)
    return _result(own.conversation_id, reply)
