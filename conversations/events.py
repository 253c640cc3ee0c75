"""A conversation's event stream (``GET /agent/conversation/{id}/events``): its messages as
they are stored, and the pieces of the reply being generated, so that a chat window needs
one stream only.

Both are rows of :class:`ConversationEvent`, numbered 1, 2, 3, ... per conversation in
commit order, which makes them resumable by number. The number is the conversation's
largest plus one; a writer that lost a race (the unique ``(conversation, seq)`` index makes
it wait for the other transaction and then refuses its row) takes the next one. So a number
is only taken once every smaller one is committed, and a reader that saw ``n`` never
misses a row numbered below ``n`` later.

A ``message`` row points at its message (its text is not copied); a ``token`` row is
copied from the chat job's ``token`` event in the transaction that writes that event (a
``post_save`` receiver: the agents app, which writes job events, knows nothing of
conversations).
"""

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from agents import eventbus as bus
from agents import events as job_events
from agents.event_views import KEEP_ALIVE, sse_event
from agents.live_admin import RETRY
from agents.models import Job
from conversations.models import ConversationEvent, ConversationEventType, Message
from conversations.serializers import MessageSerializer

logger = logging.getLogger(__name__)

# A writer that keeps losing the race for a number gives up after this many tries.
MAX_TRIES = 20
#: Events read from the table at once.
READ_BATCH = 500


def _next_seq(conversation_id: str) -> int:
    last = ConversationEvent.objects.filter(conversation_id=conversation_id).aggregate(
        last=Max("seq")
    )["last"]
    return (last or 0) + 1


def _append(rows: Sequence[ConversationEvent], *, announce: bool = True) -> None:
    """Numbers ``rows`` (events of one conversation) after its last event and stores them.
    Call inside the transaction of the change they tell of. ``announce``: wake the
    conversation's streams once it commits (a chat job's events are announced to them
    already)."""
    conversation_id = rows[0].conversation_id
    for _ in range(MAX_TRIES):
        first = _next_seq(conversation_id)
        for offset, row in enumerate(rows):
            row.seq = first + offset
        try:
            with transaction.atomic():
                ConversationEvent.objects.bulk_create(rows)
            break
        except IntegrityError:
            continue  # another writer took the number first: it is committed now
    else:
        raise RuntimeError(f"conversation {conversation_id}: no event number after {MAX_TRIES}")
    if announce:
        job_events.announce(f"conversation:{conversation_id}", {"seq": rows[-1].seq})


def messages_stored(messages: Sequence[Message]) -> None:
    """The ``message`` events of messages just stored (one conversation, in seq order)."""
    if messages:
        _append(
            [
                ConversationEvent(
                    conversation_id=m.conversation_id,
                    type=ConversationEventType.MESSAGE,
                    message=m,
                )
                for m in messages
            ]
        )


def token_stored(*, conversation_id: str, job_id: str, data: dict[str, Any]) -> None:
    """A piece of the reply a chat job of the conversation generates (its ``token`` event)."""
    _append(
        [
            ConversationEvent(
                conversation_id=conversation_id,
                type=ConversationEventType.TOKEN,
                job_id=job_id,
                data=data,
            )
        ],
        announce=False,
    )


def copy_chat_token(sender, instance, created: bool, **kwargs: Any) -> None:
    """``post_save`` of a job event: a chat job's ``token`` event goes to its conversation's
    stream too, in the same transaction."""
    if not created or instance.type != "token":
        return
    conversation_id = _conversation_of(instance.job_id)
    if conversation_id is None:
        return  # a task's tokens belong to its job alone
    token_stored(conversation_id=conversation_id, job_id=instance.job_id, data=instance.data)


@functools.lru_cache(maxsize=4096)
def _conversation_of(job_id: str) -> str | None:
    """The conversation of a job (it never changes: kept, not read per token)."""
    return Job.objects.filter(pk=job_id).values_list("conversation_id", flat=True).first()


# --- Reading -----------------------------------------------------------------------------


def last_seq(conversation_id: str) -> int:
    """The number of the conversation's last event (0 before the first)."""
    return _next_seq(conversation_id) - 1


def events_after(conversation_id: str, after: int) -> list[tuple[int, str, dict]]:
    """The conversation's events numbered above ``after``, in order, as ``(seq, type,
    data)``: a message's data is what ``GET /agent/conversation/{id}`` shows of it."""
    rows = (
        ConversationEvent.objects.filter(conversation_id=conversation_id, seq__gt=after)
        .select_related("message")
        .order_by("seq")[:READ_BATCH]
    )
    return [(row.seq, row.type, _data(row)) for row in rows]


def _data(row: ConversationEvent) -> dict[str, Any]:
    if row.type == ConversationEventType.MESSAGE:
        return dict(MessageSerializer(row.message).data)
    return row.data


# --- Serving ----------------------------------------------------------------------------

#: Pause before a failed read is tried again (the database away for a moment).
RETRY_SECONDS = 0.5


def _versions(ids: list[str]) -> dict[str, int]:
    """The last event number of each conversation (SQLite's poll compares them)."""
    rows = (
        ConversationEvent.objects.filter(conversation_id__in=ids)
        .values("conversation_id")
        .annotate(last=Max("seq"))
    )
    return {row["conversation_id"]: row["last"] for row in rows}


bus.register_version("conversation", _versions)


async def _read(conversation_id: str, after: int, *, inline: bool) -> list[tuple[int, str, dict]]:
    """:func:`events_after` in the bus's threads, tried again while the database is away."""
    while True:
        try:
            return await bus.db(events_after, conversation_id, after, inline=inline)
        except Exception as exc:
            logger.warning("Conversation event read failed (%s); trying again", exc)
            await asyncio.sleep(RETRY_SECONDS)


async def stream(conversation_id: str, after: int) -> AsyncIterator[bytes]:
    """The conversation's events numbered above ``after``, then each new one once it is
    committed, for as long as the client stays; a keep-alive comment when nothing happened
    for ``EVENTS_KEEPALIVE_SECONDS``. Waiting holds no thread and no database connection: it
    awaits the bus's wake-up for the conversation (an announcement, or SQLite's poll)."""
    async with bus.watch(f"conversation:{conversation_id}") as watched:
        while True:
            rows = await _read(conversation_id, after, inline=False)
            for seq, type, data in rows:
                yield sse_event(seq, type, data)
                after = seq
            if len(rows) == READ_BATCH:
                continue
            if not await watched.wait(settings.EVENTS_KEEPALIVE_SECONDS):
                yield KEEP_ALIVE
            watched.take()  # what was announced: the table is read again in any case


async def stored(conversation_id: str, after: int) -> AsyncIterator[bytes]:
    """The events stored so far, then the end: for a server without a lasting event loop
    (WSGI), where a stream cannot stay open. The client's ``EventSource`` reconnects after
    ``retry`` milliseconds and goes on after the last id it received."""
    yield RETRY
    for seq, type, data in await _read(conversation_id, after, inline=True):
        yield sse_event(seq, type, data)
