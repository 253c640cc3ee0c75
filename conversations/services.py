"""Writes of conversations and messages.

Sequence numbers come from the conversation's ``last_seq``, raised by one ``UPDATE``
inside the transaction that inserts the message: on PostgreSQL that update holds the
conversation's row lock until commit, on SQLite the write transaction is exclusive, so
two writers never take the same number.

A chat takes two numbers when it starts: its user message gets ``n`` and its reply slot
is ``n + 1``. So the stored order is the conversation's order even when several chats
were queued at once (question, its answer, next question, ...), and the unique
``(conversation, seq)`` constraint is a second guard that a reply is stored only once. A
chat that ends without a reply leaves its slot empty: sequence numbers may have gaps.
"""

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agents import services as jobs
from agents.models import ACTIVE, AgentProfile, Job, JobKind, JobStatus
from agents.selectors import profile_get
from conversations import events, tokens
from conversations.frame import message_limit
from conversations.models import Conversation, Message, OnBusy, Role
from core.db import run_again_if_dropped_at_commit
from core.exceptions import ConversationBusy, InvalidInput
from core.ids import new_job_id


def conversation_get_or_create(
    *, owner_id: int, source: str, scope_type: str, scope_id: str, profile: AgentProfile
) -> Conversation:
    """The conversation of this scope, created when missing.

    Safe against a concurrent creator: the unique constraint ``one_conversation_per_scope``
    refuses the second insert, and ``get_or_create`` then reads the winner's row.
    """
    conversation, _ = Conversation.objects.get_or_create(
        owner_id=owner_id,
        source=source,
        scope_type=scope_type,
        scope_id=scope_id,
        defaults={"profile": profile},
    )
    return conversation


def _take_seqs(conversation_id: str, *, seqs: int, messages: int, **fields: Any) -> int:
    """Reserves ``seqs`` sequence numbers for ``messages`` new messages and returns the
    first number. Call inside a transaction."""
    Conversation.objects.filter(pk=conversation_id).update(
        last_seq=F("last_seq") + seqs,
        message_count=F("message_count") + messages,
        updated_at=timezone.now(),
        **fields,
    )
    last = Conversation.objects.filter(pk=conversation_id).values_list("last_seq", flat=True)
    return last.get() - seqs + 1


def _count_message(conversation_id: str) -> None:
    Conversation.objects.filter(pk=conversation_id).update(
        message_count=F("message_count") + 1, updated_at=timezone.now()
    )


def chat_request(
    *,
    api_key,
    source: str,
    scope_type: str,
    scope_id: str,
    prompt: str,
    profile_name: str | None,
    on_busy: str = OnBusy.ENQUEUE,
    webhook: str = "",
    webhook_events: list[str] | None = None,
) -> tuple[Conversation, Job]:
    """A chat as the API asks for it: the profile (:class:`UnknownProfile`), the prompt's
    size against the profile's window (:class:`InvalidInput`), then :func:`chat_start`. A
    dropped connection, even one that cut the commit, stores the message and its job once.

    The size is the heuristic's, not the runtime tokenizer's: a single-slot runtime
    (llama.cpp) would make this request wait behind a generation. It over-counts; the
    worker recounts the message with the tokenizer before it builds the context.
    """
    profile = profile_get(profile_name)
    prompt_tokens = tokens.estimate(prompt)
    limit = message_limit(profile)
    if prompt_tokens > limit:
        raise InvalidInput(
            {
                "prompt": [
                    f"Too long for the profile's context window: {prompt_tokens} tokens, "
                    f"at most {limit}."
                ]
            }
        )
    job_id = new_job_id()

    def start() -> tuple[Conversation, Job]:
        conversation, job, _ = chat_start(
            api_key=api_key,
            source=source,
            scope_type=scope_type,
            scope_id=scope_id,
            prompt=prompt,
            prompt_tokens=prompt_tokens,
            profile=profile,
            job_id=job_id,
            on_busy=on_busy,
            webhook=webhook,
            webhook_events=webhook_events,
        )
        return conversation, job

    def committed() -> tuple[Conversation, Job] | None:
        job = jobs.job_committed(job_id)
        return None if job is None else (job.conversation, job)

    return run_again_if_dropped_at_commit(start, committed=committed)


@transaction.atomic
def chat_start(
    *,
    api_key,
    source: str,
    scope_type: str,
    scope_id: str,
    prompt: str,
    prompt_tokens: int,
    profile: AgentProfile,
    job_id: str | None = None,
    on_busy: str = OnBusy.ENQUEUE,
    webhook: str = "",
    webhook_events: list[str] | None = None,
) -> tuple[Conversation, Job, Message]:
    """Stores the user's message and its chat job in one transaction; the job is woken
    once it commits. The seqs are taken before the job is created, so that the order of
    the chat jobs (their ``created_at``) is the order of their messages. ``on_busy`` says
    what to do when the conversation has a chat queued or running (:func:`_when_busy`)."""
    conversation = conversation_get_or_create(
        owner_id=api_key.owner_id,
        source=source,
        scope_type=scope_type,
        scope_id=scope_id,
        profile=profile,
    )
    if on_busy != OnBusy.ENQUEUE:
        _when_busy(conversation, on_busy=on_busy)
    seq = _take_seqs(conversation.pk, seqs=2, messages=1, profile=profile)
    job = jobs.job_create(
        api_key=api_key,
        kind=JobKind.CHAT,
        source=source,
        scope_type=scope_type,
        scope_id=scope_id,
        profile=profile,
        conversation=conversation,
        job_id=job_id,
        webhook=webhook,
        webhook_events=webhook_events,
    )
    message = Message.objects.create(
        conversation=conversation,
        seq=seq,
        role=Role.USER,
        content=prompt,
        token_estimate=prompt_tokens,
        job=job,
    )
    events.messages_stored([message])
    return conversation, job, message


def _when_busy(conversation: Conversation, *, on_busy: str) -> None:
    """``reject``: :class:`ConversationBusy` if a chat of the conversation is queued or
    running (nothing is stored). ``interrupt``: those chats are cancelled as a cancel would
    (a running one stops at its worker's next check; its user message stays, unanswered),
    and the new chat runs after them. The conversation's row is locked first, so that two
    such chats decide one after the other."""
    Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
    busy = list(
        Job.objects.filter(
            conversation=conversation, kind=JobKind.CHAT, status__in=(JobStatus.QUEUED, *ACTIVE)
        ).order_by("created_at")
    )
    if not busy:
        return
    if on_busy == OnBusy.REJECT:
        raise ConversationBusy(conversation_id=conversation.pk, job_id=busy[0].pk)
    for job in busy:
        jobs.job_cancel(job)


def message_store_reply(*, job: Job, token: str, content: str, token_estimate: int) -> Message:
    """Stores the chat job's reply in its slot (the seq after its user message), once: a
    second call (the job delivered twice) returns the stored reply. The unique indexes
    on ``(job, role)`` and ``(conversation, seq)`` settle a race the first look missed."""
    existing = Message.objects.filter(job=job, role=Role.ASSISTANT).first()
    if existing is not None:
        return existing
    question = Message.objects.filter(job=job, role=Role.USER).values_list("seq", flat=True)
    try:
        with transaction.atomic():
            if not Job.objects.filter(pk=job.pk, lease_owner=token, status__in=ACTIVE).exists():
                raise jobs.LeaseLost(job.pk)
            reply = Message.objects.create(
                conversation_id=job.conversation_id,
                seq=question.get() + 1,
                role=Role.ASSISTANT,
                content=content,
                token_estimate=token_estimate,
                job=job,
            )
            _count_message(job.conversation_id)
            events.messages_stored([reply])
            return reply
    except IntegrityError:
        existing = Message.objects.filter(job=job, role=Role.ASSISTANT).first()
        if existing is None:
            raise
        return existing


def conversation_summary_store(
    *, conversation: Conversation, summary: str, until_seq: int, summary_tokens: int
) -> bool:
    """Replaces the rolling summary if nobody moved it since ``conversation`` was read."""
    stored = Conversation.objects.filter(
        pk=conversation.pk, summary_until_seq=conversation.summary_until_seq
    ).update(summary=summary, summary_until_seq=until_seq, summary_tokens=summary_tokens)
    if stored:
        conversation.summary = summary
        conversation.summary_until_seq = until_seq
        conversation.summary_tokens = summary_tokens
    return bool(stored)


@transaction.atomic
def messages_import(
    *, conversation: Conversation, messages: Iterable[tuple[str, str]], batch_size: int = 2000
) -> int:
    """Appends ``(role, content)`` pairs to a conversation in bulk (imports, tests and
    benchmarks). Counts tokens with the heuristic: a tokenizer call per message would
    make a large import slow. Returns the number of messages added."""
    rows = [(role, content) for role, content in messages]
    if not rows:
        return 0
    first = _take_seqs(conversation.pk, seqs=len(rows), messages=len(rows))
    stored = Message.objects.bulk_create(
        [
            Message(
                conversation=conversation,
                seq=first + offset,
                role=role,
                content=content,
                token_estimate=tokens.estimate(content),
            )
            for offset, (role, content) in enumerate(rows)
        ],
        batch_size=batch_size,
    )
    events.messages_stored(stored)
    conversation.refresh_from_db(fields=["last_seq", "message_count", "updated_at"])
    return len(rows)


def message_set_token_count(*, message_id: int, tokens: int) -> None:
    """Replaces a message's stored token count (the heuristic's) by the tokenizer's."""
    Message.objects.filter(pk=message_id).update(token_estimate=tokens)
