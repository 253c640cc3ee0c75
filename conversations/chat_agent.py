"""The chat agent: the job of kind ``chat``, one straight turn.

1. **Load.** The job's user message was stored with the job (selectors). If its reply is
   stored already (the job was delivered again after its worker died), that reply is the
   result.
2. **Context.** The pure builder (``conversations.context``) chooses what goes in, as
   structured parts (a ``context`` step, ``conversations.chat_turn``). When the history
   does not fit, the agent itself loads the older messages that matter for the new message
   before it calls the model: ``search_history`` with the message (its words and its
   meaning; hits below the relevance floor are left out, and the step says why; the
   search follows, bounded, the names of its hits whose messages fit the question), each
   hit with the other half of its exchange (a ``tool_call`` step); ``conversations.arrange``
   dates, ranks and marks them, and the context is built again with them.
3. **Render and call.** To a question that asks to be told something back, a base model (a
   transcript prompt) is shown the user's messages it asks about again last before it, under
   the earlier history's header (:func:`focused`): it answers from what it read last, even
   what is in the recent window. ``conversations.render`` writes the context once in the
   profile's prompt style (a transcript for a base model, which lists no tools, or chat
   messages for an instruction-tuned one), and the model is called. An answer that asks for
   a tool (the agents' format, ``{"tool": ..., "arguments": {...}}``) runs it when the
   prompt listed the tools (a base model's transcript lists none: its tool call is an echo
   of the conversation, not run, and asked again); messages a history tool loads join the
   context, other results are told after the new message; then the model is called again. At
   most ``profile.max_steps`` model calls; the last one is offered no tools. Any other text
   is the reply, cleaned of what the model invented around it (``agents.replies``; the raw
   text stays in the ``model_call`` step); a reply that is empty once cleaned is asked
   again, with sampling. So is a reply that borrows from the prompt's scaffolding rather
   than answering (the example conversation's facts, the previous reply again, a value the
   user never gave, nothing of what the user told about what they ask or nothing they said
   at all, an answer taken from what they said of another thing:
   ``conversations.borrowing``), up to ``BORROWED_RETRIES`` times (an instruction-tuned
   model's retries show the messages asked about again too): greedily when the prompt shows
   other messages than the last call's (the messages asked about shown again, or an old
   value's left out), else sampled; then the profile's ``unknown_reply`` ("I don't know.")
   is the reply to a question, at once when the user never named what they ask about, and
   its ``acknowledgement_reply`` ("Thanks for telling me.") to anything else. To a question
   that asks to be told something back, an ``unknown_reply`` given so, or a reply of the
   model's that only says it does not know, is followed by the user's sentence about what
   they ask, quoted ("I don't know. You told me: “My favourite colour is teal.”":
   ``conversations.quoting``), when there is one (when the user named nothing asked, only
   the retrieved message marked the most recent of those about it). To a question about
   the user's own things, a reply's sentences that tell their facts in their voice ("I
   work in Leeds." to "Where do I work?") are said as the assistant ("You work in Leeds.":
   ``conversations.perspective``), as the reply streams. A model call whose text is not the
   reply is marked so (``Discard``: its streamed tokens are taken back), and the reply given
   instead is given by a note step whose tokens carry it (``Say``): the tokens of the step
   that produced the stored reply are that reply.
4. **Store.** The reply is stored once (a service); then, when enough history slid out of
   the window, the oldest is folded into the rolling summary (a ``summarize`` model call).

Every step is a request to the runner (``agents.actions``), which records it.
"""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agents.actions import Discard, ModelCall, Note, Say, Steps
from agents.answers import NOT_OFFERED, parse_answer, retry_options
from agents.context import AgentFailure, JobCancelled
from agents.kinds import agent
from agents.models import AgentProfile, Job, JobKind
from agents.replies import clean_reply
from conversations import render, services, summary, tokens, vectors
from conversations.alike import embedded_alike
from conversations.asking import asks_about_the_user, asks_back, is_question
from conversations.borrowing import borrowed, told_about
from conversations.chat_turn import ChatTurn
from conversations.closeness import (
    closeness,
    far_seqs,
    relevant_seqs,
    similar_seqs,
    unrelated_seqs,
)
from conversations.context import Context
from conversations.events import REPLACED_STEP, REPLY_STEP
from conversations.frame import EARLIER_HEADER
from conversations.models import Message, Role
from conversations.outdated import stale_seqs, without_stale
from conversations.perspective import said_back
from conversations.quoting import only_abstains, quoted, told_sentence
from conversations.selectors import conversation_get, messages_of_job
from conversations.told import user_items
from core.exceptions import DomainError
from gateway import embeddings

# Retries of a reply that borrowed from the prompt before the reply given instead.
BORROWED_RETRIES = 2
# What no retry can mend: the reply given instead at once (instead_of_borrowed).
FINAL = frozenset({"never_said", "abstained"})
UNKNOWN_REPLY = "I don't know."  # a profile's unknown_reply left blank
ACKNOWLEDGEMENT_REPLY = "Thanks for telling me."  # a profile's acknowledgement_reply left blank
# Why a reply step's text was not kept (its step's ``output.discarded``).
DISCARDED_TOOL_CALL, DISCARDED_UNUSABLE, DISCARDED_BORROWED = "tool_call", "unusable", "borrowed"
# It said it did not know: said again in the profile's words, the user's quoted if any.
DISCARDED_QUOTED = "quoted"
# The user's messages shown again just before a question that asks them back, at most.
FOCUS_MESSAGES = 2


def _result(conversation_id: str, reply: Message) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "message": {"role": Role.ASSISTANT, "content": reply.content, "seq": reply.seq},
    }


def load_turn(job: Job, own: Message) -> ChatTurn:
    """The turn's state; the user's message counted by the runtime's tokenizer (the view
    stored the heuristic)."""
    conversation = conversation_get(own.conversation_id)
    counted = tokens.count(job.profile.model, own.content)
    if counted != own.token_estimate:
        services.message_set_token_count(message_id=own.pk, tokens=counted)
    return ChatTurn(job, conversation, own, tokens=counted)


def embed_messages(messages: list[Message]) -> Steps:
    """Stores the messages' vectors (in the worker, in one batch). When the embedder is down
    the chat goes on; the scheduled catch-up embeds the messages later."""
    if embeddings.model_id() is None:
        return
    try:
        vectors.messages_embed_loaded(messages)
    except embeddings.EmbeddingUnavailable as exc:
        yield Note("embedding_skipped", {"seqs": [m.seq for m in messages], "reason": str(exc)})


def first_context(job: Job) -> Steps:
    """The context of a chat job's first model call (what the benchmarks measure)."""
    turn = load_turn(job, messages_of_job(job)[Role.USER])
    return (yield from turn.prepare(offer_tools=True))


def focused(context: Context, scores: dict[int, float]) -> Context:
    """The context of a call to a question that asks to be told something back: the
    user's messages it asks about (those not retrieved already; ``scores``: by
    :func:`closeness`) shown again last before it, under the earlier history's header (a
    small model answers from what it read last), while they fit the budget."""
    if not asks_back(context.message.content):
        return context
    shown = {item.seq for item in context.retrieved}
    about = [
        item
        for item in told_about(context, similar_seqs(scores), unrelated_seqs(scores))
        if item.role == Role.USER and item.seq not in shown
    ][-FOCUS_MESSAGES:]
    extra = sum(item.cost(numbered=True) for item in about)
    extra += 0 if context.retrieved else tokens.estimate(EARLIER_HEADER) + 2
    if not about or context.used + extra > context.budget:
        return context
    return replace(context, retrieved=[*context.retrieved, *about], used=context.used + extra)


def instead_of_borrowed(profile: AgentProfile, message: str, sentence: str | None = None) -> str:
    """The reply given instead of one that kept borrowing: the profile's ``unknown_reply``
    to a question, with the user's ``sentence`` about what they ask quoted after it when
    there is one (``conversations.quoting``); its ``acknowledgement_reply`` to anything else
    ("I don't know." is no answer to "Hi, I'm Nadia.")."""
    unknown = profile.unknown_reply.strip() or UNKNOWN_REPLY
    if sentence is not None:
        return quoted(unknown, sentence)
    if is_question(message):
        return unknown
    return profile.acknowledgement_reply.strip() or ACKNOWLEDGEMENT_REPLY


def _checked(
    turn: ChatTurn, context: Context, text: str, scores: dict[int, float], *, last: bool
) -> Steps:
    """The reply to store: ``text``; or, when it borrows from the prompt rather than
    answering (``conversations.borrowing``; ``scores``: by :func:`closeness`), None to ask
    again, or the reply given instead (:func:`instead_of_borrowed`) once
    ``BORROWED_RETRIES`` retries are spent, on the last allowed call, or at once for a kind
    no retry can mend (``FINAL``). A note says what was borrowed."""
    found = borrowed(
        text, context, turn.profile.system_prompt, similar_seqs(scores),
        relevant=relevant_seqs(context, scores), alike=embedded_alike(),
        unrelated=unrelated_seqs(scores), far=far_seqs(scores),
    )  # fmt: skip
    if found is None:
        return (yield from _quoted_if_unknown(turn, context, text, scores))
    turn.borrowed += 1
    if found.problem == "outdated":
        turn.stale |= stale_seqs(text, context, found.words)
    yield Note(
        "reply_borrowed",
        {"problem": found.describe(), "kind": found.problem, "words": list(found.words),
         "reply": text},
    )  # fmt: skip
    yield Discard(DISCARDED_BORROWED)
    if not last and turn.borrowed <= BORROWED_RETRIES and found.problem not in FINAL:
        return None
    sentence = yield from _told(turn, context, scores, found.problem)
    instead = instead_of_borrowed(turn.profile, context.message.content, sentence)
    # Streamed as the reply is: its tokens are the stored reply.
    return (yield Say(REPLACED_STEP, instead, {"reply": instead}))


def _told(turn: ChatTurn, context: Context, scores: dict[int, float], problem: str = "") -> Steps:
    """The user's sentence to quote beside "I don't know." (``conversations.quoting``), or
    None; a note says which. After a reply refused as ``abstained`` none (nothing was
    asked); as ``never_said`` only a retrieved one marked the most recent."""
    if problem == "abstained":
        return None
    similar, relevant = similar_seqs(scores), relevant_seqs(context, scores)
    sentence = told_sentence(
        context, similar, relevant, turn.stale,
        marked_only=problem == "never_said", unrelated=unrelated_seqs(scores),
    )  # fmt: skip
    if sentence is not None:
        yield Note("reply_quoted", {"sentence": sentence})
    return sentence


def _quoted_if_unknown(
    turn: ChatTurn, context: Context, text: str, scores: dict[int, float]
) -> Steps:
    """``text``; or, when it only says it does not know to a question, the profile's
    ``unknown_reply`` ("I don't remember." is said as the profile says it), with the user's
    sentence about what they ask quoted when there is one (given by a note step)."""
    question = context.message.content
    if not (is_question(question) and only_abstains(text)):
        return text
    sentence = yield from _told(turn, context, scores)
    instead = instead_of_borrowed(turn.profile, question, sentence)
    if instead == text.strip():
        return text
    yield Discard(DISCARDED_QUOTED)
    return (yield Say(REPLACED_STEP, instead, {"reply": instead}))


def in_assistants_voice(context: Context) -> Callable[[str], str] | None:
    """To a question about the user's own things, the rewrite of a reply that says the
    assistant's sentences that tell the user's facts in the user's voice as the assistant
    (``conversations.perspective``): given to the model call, so that the reply's tokens
    carry the reply as it is stored."""
    if not asks_about_the_user(context.message.content):
        return None
    told = [item.content for item in user_items(context)]
    return lambda reply: said_back(reply, told)


def answer(turn: ChatTurn) -> Steps:
    """The model's reply to the turn, cleaned: ``(context, reply)`` (see the module)."""
    profile, max_steps = turn.profile, turn.profile.max_steps
    retry = False  # whether this call asks again
    last_shown: list[int] | None = None  # the messages the last call's prompt showed
    for round_number in range(1, max_steps + 1):
        # Only the tools the prompt lists (``context.tools``) may run: a base model gets no
        # tool list, so a tool call in its answer is an echo of the conversation.
        offer = round_number < max_steps and bool(turn.enabled)
        listed = offer and not profile.is_transcript
        context = yield from (
            turn.prepare(offer_tools=listed)
            if round_number == 1
            else turn.build(round_number=round_number, offer_tools=listed, why="tool")
        )
        # Once a round: the messages shown again are the context's own, of the same scores.
        scores = closeness(turn, context)
        if profile.is_transcript or turn.borrowed:  # a base model's first call too
            context = focused(context, scores)
        # The prompt leaves out what an outdated reply took; the checks still read it.
        prompt = without_stale(context, turn.stale)
        # Greedy decoding gives the same answer to the same prompt: a retry whose prompt
        # shows the same messages as the last call's samples (seeded by the call's number).
        shown = [item.seq for item in (*prompt.recent, *prompt.retrieved)]
        options = retry_options(round_number) if retry and shown == last_shown else None
        last_shown = shown
        voice = in_assistants_voice(context)
        text = yield render.model_call(
            profile, prompt, name=REPLY_STEP, options=options, rewrite=voice
        )
        parsed = parse_answer(text)
        if parsed.kind == "tool":
            yield Discard(DISCARDED_TOOL_CALL)
        if parsed.kind == "tool" and context.tools:
            yield from turn.use_tool(parsed.tool, parsed.arguments, offered=context.tools)
            continue
        if parsed.kind == "tool" and (offer or profile.is_transcript):
            yield Note("unusable_answer", {"problem": NOT_OFFERED, "tool": parsed.tool})
            retry = True
            continue
        if parsed.kind == "tool":
            raise AgentFailure("The model asked for a tool on its last allowed call.")
        cleaned = clean_reply(text, transcript=profile.is_transcript)
        if cleaned.removed:
            yield Note("reply_cleaned", {"removed": cleaned.removed, "kept": cleaned.text})
        if voice is not None:
            cleaned = replace(cleaned, text=voice(cleaned.text))
        if cleaned.text:
            last = round_number == max_steps
            reply = yield from _checked(turn, context, cleaned.text, scores, last=last)
            if reply is not None:
                return context, reply
            retry = True
            continue
        problem = "Nothing was left of the answer once cleaned." if text.strip() else None
        yield Discard(DISCARDED_UNUSABLE)
        yield Note("unusable_answer", {"problem": problem or "The answer was empty."})
        retry = True
    raise AgentFailure(f"The model gave no usable answer within {max_steps} model calls.")


def summarize(turn: ChatTurn, context: Context) -> Steps:
    """Folds history that left the window into the summary; never fails the chat."""
    profile, conversation = turn.profile, turn.conversation
    if not summary.summary_due(conversation, context, turn.message.seq):
        return
    before = min(context.window_start or turn.message.seq, turn.message.seq)
    request = summary.summary_request(profile=profile, conversation=conversation, before_seq=before)
    if request is None:
        return
    options = {"num_predict": request.max_tokens, "stop": summary.SUMMARY_STOP}
    chat = None if profile.is_transcript else render.single_message(request.prompt)
    try:
        text = yield ModelCall("summarize", request.prompt, messages=chat, options=options)
    except (DomainError, JobCancelled) as exc:
        yield Note("summary_skipped", {"reason": str(exc) or type(exc).__name__})
        return
    limit = summary.summary_limit(profile)
    text = summary.clean_summary(text, limit=limit)
    if not text:
        yield Note("summary_skipped", {"reason": "The model wrote an empty summary."})
        return
    counted = tokens.count(profile.model, text)
    if counted > limit:  # the runtime counts more than the heuristic: cut further
        text = summary.clean_summary(text, limit=max(0, 2 * limit - counted))
        counted = tokens.count(profile.model, text)
    stored = services.conversation_summary_store(
        conversation=conversation, summary=text, until_seq=request.until_seq,
        summary_tokens=counted,
    )  # fmt: skip
    yield Note(
        "summary_stored" if stored else "summary_not_stored",
        {"until_seq": request.until_seq, "messages": request.messages, "tokens": counted},
    )


@agent(JobKind.CHAT)
def run_chat(job: Job, token: str) -> Steps:
    messages = messages_of_job(job)
    own = messages.get(Role.USER)
    if own is None:
        raise AgentFailure("The chat job has no user message to answer.")
    stored = messages.get(Role.ASSISTANT)
    if stored is not None:
        yield Note("reply_already_stored", {"seq": stored.seq})
        return _result(own.conversation_id, stored)

    turn = load_turn(job, own)
    # Findable by meaning from now on, not only once the reply is stored: the vector is
    # the one its own search uses as the query.
    yield from embed_messages([own])
    context, content = yield from answer(turn)
    reply = services.message_store_reply(
        job=job, token=token, content=content,
        token_estimate=tokens.count(turn.profile.model, content),
    )  # fmt: skip
    yield from embed_messages([reply])
    yield from summarize(turn, context)
    return _result(own.conversation_id, reply)
