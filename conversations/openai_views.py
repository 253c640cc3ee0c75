"""Agents as models of the OpenAI-compatible face: ``model: "agent/<profile>"``.

A chat completion for an agent model starts a chat job on the conversation of (key owner,
``source`` = ``openai``, ``scope_type`` = ``user``, ``scope_id`` = the request's ``user``),
or of the ids in ``metadata.source`` / ``metadata.scope_type`` / ``metadata.scope_id``,
exactly as ``POST /agent/chat`` does (the key's agent scope and limits). The agent owns the
history: only the last ``user`` message is the new prompt. The answer waits for the job and
carries ``conversation_id`` and ``job_id``; a failed or cancelled job is an error, and a
client that goes away cancels the job (as it cancels the runtime call of any other model).
Streamed, the reply's tokens are relayed from the job's events as the worker generates them.
Every other model is the gateway's face.
"""

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from django.db.models import Sum

from agents import eventbus
from agents import services as jobs
from agents.models import TERMINAL, AgentProfile, Job, JobStatus
from conversations import services
from core.exceptions import InvalidInput, JobCancelled, JobFailed, JobNotCancellable
from gateway import openai_sse, openai_views, openai_wire
from gateway import services as gateway_services
from gateway.dbthread import in_thread
from gateway.models import ApiKey, Scope, UsageRecord
from gateway.openai_serializers import ChatCompletionRequestSerializer
from gateway.openai_sse import Pieces
from gateway.ratelimit import Bucket, take_slot

PREFIX = "agent/"
# The chat agent's model calls whose text may be the reply (its summary is another step).
REPLY_STEP = "reply"
SOURCE, SCOPE_TYPE = "openai", "user"
# How often a waiting request reads its job's status: from the first interval, doubling
# up to the last.
POLL_FIRST, POLL_LAST = 0.02, 0.25


@dataclass(frozen=True)
class AgentChat:
    job_id: str
    conversation_id: str
    model: str
    fields: dict[str, Any]


def _scope(fields: dict[str, Any]) -> tuple[str, str, str]:
    metadata = fields.get("metadata") or {}
    scope_id = metadata.get("scope_id") or fields.get("user")
    if not scope_id:
        raise InvalidInput(
            {
                "user": [
                    "Agent models need a `user` (or `metadata.scope_id`): it names the "
                    "conversation the agent keeps."
                ]
            }
        )
    return metadata.get("source") or SOURCE, metadata.get("scope_type") or SCOPE_TYPE, scope_id


def start_agent_chat(plain: str, data: Any) -> AgentChat:
    """Key, agent scope, fields, the key's agent start limit, then the chat job."""
    api_key = gateway_services.api_key_authenticate(plain)
    gateway_services.api_key_require_scope(api_key, Scope.AGENT)
    fields = openai_views.validated(ChatCompletionRequestSerializer, data)
    source, scope_type, scope_id = _scope(fields)
    prompt = openai_wire.last_user_text(fields["messages"])
    if not prompt:
        raise InvalidInput(
            {"messages": ["Agent models read the last `user` message: there is none."]}
        )
    take_slot(api_key, bucket=Bucket.AGENT_START, limit=api_key.agent_starts_per_minute)
    conversation, job = services.chat_request(
        api_key=api_key,
        source=source,
        scope_type=scope_type,
        scope_id=scope_id,
        prompt=prompt,
        profile_name=fields["model"].removeprefix(PREFIX),
    )
    return AgentChat(job.pk, conversation.pk, fields["model"], fields)


def _job_state(job_id: str) -> dict[str, Any]:
    return Job.objects.filter(pk=job_id).values("status", "final_result", "error").get()


def _job_tokens(job_id: str) -> dict[str, int | None]:
    return UsageRecord.objects.filter(job_id=job_id).aggregate(
        prompt_tokens=Sum("prompt_tokens"), completion_tokens=Sum("completion_tokens")
    )


def _cancel(job_id: str) -> None:
    with contextlib.suppress(JobNotCancellable):  # it ended meanwhile
        jobs.job_cancel(Job.objects.get(pk=job_id))


async def wait_for_reply(chat: AgentChat) -> str:
    """The reply of the chat's job once it ends; :class:`JobFailed` / :class:`JobCancelled`
    when it did not finish. Cancelled (the client went away), it cancels the job."""
    interval = POLL_FIRST
    try:
        while True:
            state = await in_thread(_job_state, chat.job_id)
            if state["status"] in TERMINAL:
                break
            await asyncio.sleep(interval)
            interval = min(interval * 2, POLL_LAST)
    except asyncio.CancelledError:
        await in_thread(_cancel, chat.job_id)
        raise
    return _reply_of(chat, state)


def _reply_of(chat: AgentChat, state: dict[str, Any]) -> str:
    """The reply of the chat's ended job (``state``: its status and ``final_result`` or
    ``error``); :class:`JobFailed` / :class:`JobCancelled` when it did not finish."""
    if state["status"] == JobStatus.FAILED:
        raise JobFailed(job_id=chat.job_id, error=state.get("error") or "failed")
    if state["status"] == JobStatus.CANCELLED:
        raise JobCancelled(job_id=chat.job_id)
    return str(((state.get("final_result") or {}).get("message") or {}).get("content") or "")


async def _reply_pieces(chat: AgentChat, started: float) -> Pieces:
    """The reply as the job generates it: the text of the ``token`` events of its ``reply``
    model calls, relayed from the job's event stream; then, once the job finished, the rest
    of the stored reply (none when the stream carried it all) and the call's result.

    An OpenAI stream cannot take text back: when the job discards an attempt whose tokens
    were relayed (a borrowed reply, asked again), nothing more is relayed, and the stored
    reply follows in full after a blank line. A failed or cancelled job raises
    :class:`JobFailed` / :class:`JobCancelled`. Closed before the job ended (the client went
    away), it cancels the job."""
    replies: set[int] = set()
    relayed: set[int] = set()  # the reply steps whose tokens were relayed
    sent: list[str] = []
    taken_back = ended = False
    try:
        async with contextlib.aclosing(eventbus.job_events(chat.job_id)) as job_events:
            async for event in job_events:
                if event.type == "step" and event.data.get("name") == REPLY_STEP:
                    replies.add(event.data["index"])
                    discarded = (event.data.get("output") or {}).get("discarded")
                    taken_back = taken_back or bool(discarded and event.data["index"] in relayed)
                elif event.type == "token" and event.data["step"] in replies and not taken_back:
                    relayed.add(event.data["step"])
                    sent.append(event.data["text"])
                    yield event.data["text"]
                elif event.type == "status" and event.data["status"] in TERMINAL:
                    ended = True
                    state = event.data
    finally:
        if not ended:
            await asyncio.shield(in_thread(_cancel, chat.job_id))
    text = _reply_of(chat, state)
    streamed = "".join(sent)
    if text.startswith(streamed):
        if len(text) > len(streamed):
            yield text[len(streamed) :]
    else:
        yield f"\n\n{text}"
    tokens = await in_thread(_job_tokens, chat.job_id)
    yield gateway_services.ModelCallResult(
        model=chat.model, response=text, elapsed=time.perf_counter() - started, **tokens
    )


class ChatCompletionsView(openai_views.ChatCompletionsView):
    """The gateway's chat completions, with ``agent/<profile>`` models run by the agent."""

    async def complete(self, plain: str, data: dict[str, Any], started: float):
        model = data.get("model")
        if not (isinstance(model, str) and model.startswith(PREFIX)):
            return await super().complete(plain, data, started)
        chat = await in_thread(start_agent_chat, plain, data)
        extra = {"conversation_id": chat.conversation_id, "job_id": chat.job_id}
        answer_id, created = openai_views.new_id("chatcmpl"), int(time.time())
        if chat.fields["stream"]:
            pieces = _reply_pieces(chat, started)
            return await openai_sse.event_stream(
                self.request,
                openai_sse.chat_events(
                    await openai_sse.first_of(pieces),
                    pieces,
                    id=answer_id,
                    created=created,
                    model=chat.model,
                    with_usage=openai_views.include_usage(chat.fields),
                    extra=extra,
                ),
            )
        text = await wait_for_reply(chat)
        tokens = await in_thread(_job_tokens, chat.job_id)
        return openai_views.json_answer(
            openai_wire.chat_completion(
                id=answer_id,
                created=created,
                model=chat.model,
                text=text,
                finish_reason="stop",
                extra=extra,
                **tokens,
            )
        )


def _agent_models(api_key: ApiKey) -> list[tuple[str, str]]:
    if Scope.AGENT not in api_key.scopes:
        return []
    names = AgentProfile.objects.order_by("name").values_list("name", flat=True)
    return [(f"{PREFIX}{name}", "agent") for name in names]


class ModelsView(openai_views.ModelsView):
    """The gateway's models, and one ``agent/<profile>`` per agent profile."""

    async def models(self, api_key: ApiKey) -> list[tuple[str, str]]:
        return await super().models(api_key) + await in_thread(_agent_models, api_key)
