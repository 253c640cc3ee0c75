"""A conversation's event stream (``GET /agent/conversation/{id}/events``): its messages as
they are stored, and the pieces of the reply being generated, so that a chat window needs
one stream only.

Nothing is stored for it: the stream reads the conversation's messages and the events of
its chat jobs (``agents.JobEvent``), so a reply's text is written once, as the job's
``token`` events. It follows the conversation's order, that of ``GET
/agent/conversation/{id}``: a user's message, the reply being written (its chat job's
``token`` events, and a ``discard`` when a piece of text shown is not kept), the reply, the
next message. A message's id is its ``seq`` times :data:`SLOT`; the events of the chat job
that a user message started are numbered after it, by the job's own event ids (``seq x
SLOT + n``), so every id is known once and for all and a stream resumes exactly after any
of them. As the order is the conversation's, a message stored while the reply before it is
still being written (a chat waits for the one before it) comes after that reply.

Which job events show: the ``token`` events of the steps that write a reply (the model
calls named ``reply`` and the note ``reply_replaced``, whose text is the profile's
``unknown_reply`` or ``acknowledgement_reply``); the ``step`` event that marks such a
step's text ``discarded`` (or ends it for a run whose worker died, ``attempt``); and the
``failed`` or ``cancelled`` status of a chat that stored no reply, which takes back the
text of its last reply step. A summary's model call writes no reply: its tokens stay in the
job's stream.
"""

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Max, Q

from agents import eventbus as bus
from agents import events as job_events
from agents.event_models import JobEvent, JobEventType
from agents.event_views import KEEP_ALIVE, sse_event
from agents.live_admin import RETRY
from agents.models import TERMINAL, Job, JobKind, JobStatus
from conversations.models import Message, Role
from conversations.serializers import MessageSerializer

logger = logging.getLogger(__name__)

#: A message's id in the stream is its seq times this; its chat job's events follow it.
SLOT = 1_000_000
#: The steps of a chat job whose tokens are a reply (``conversations.chat_agent``).
REPLY_STEP, REPLACED_STEP = "reply", "reply_replaced"
REPLY_STEPS = frozenset((REPLY_STEP, REPLACED_STEP))
#: Why the text of a reply step of a run whose worker died is taken back.
LOST = "attempt_lost"
#: Events read at once (a read stops at the first message past them).
READ_BATCH = 500
#: Messages read at once.
MESSAGE_BATCH = 100

Row = tuple[int, str, dict[str, Any]]


def messages_stored(messages: Sequence[Message]) -> None:
    """Wakes the streams of the conversation of ``messages`` (just stored, in the current
    transaction) once it commits."""
    if messages:
        last = messages[-1]
        job_events.announce(f"conversation:{last.conversation_id}", {"seq": last.seq})


# --- Reading -----------------------------------------------------------------------------


def _open_chats(conversation_id: str) -> set[str]:
    chats = Job.objects.filter(conversation_id=conversation_id, kind=JobKind.CHAT)
    return set(chats.exclude(status__in=TERMINAL).values_list("pk", flat=True))


def _last_job_event(job_id: str) -> int:
    last = JobEvent.objects.filter(job_id=job_id, seq__lt=SLOT).aggregate(last=Max("seq"))
    return last["last"] or 0


def last_seq(conversation_id: str) -> int:
    """The id of the conversation's last event so far (0 before the first): where a stream
    opened now starts (the rest of a reply being written, then what comes)."""
    open_chats = _open_chats(conversation_id)  # first: a chat over now shows its reply next
    asked = Message.objects.filter(job_id__in=open_chats, role=Role.USER)
    answered = set(
        Message.objects.filter(job_id__in=open_chats, role=Role.ASSISTANT).values_list(
            "job_id", flat=True
        )
    )
    waiting = asked.exclude(job_id__in=answered).order_by("seq").first()
    if waiting is not None:  # a reply is being written (or will be): within its slot
        return waiting.seq * SLOT + _last_job_event(waiting.job_id)
    last = Message.objects.filter(conversation_id=conversation_id).order_by("-seq").first()
    if last is None:
        return 0
    if last.role == Role.USER and last.job_id:  # its chat ended without a reply
        return last.seq * SLOT + _last_job_event(last.job_id)
    return last.seq * SLOT


def _chat_events(job_id: str, base: int, after: int, *, answered: bool) -> list[Row]:
    """What the stream shows of a chat job's events after ``after`` (a job event id), as
    ``(id, type, data)`` with ids from ``base`` (see the module). ``answered``: its reply
    is stored (an end without one takes back the text of its last reply step)."""
    ended = [] if answered else [JobStatus.FAILED, JobStatus.CANCELLED]
    rows = JobEvent.objects.filter(job_id=job_id, seq__lt=SLOT).filter(
        # Every step event: the names of the steps whose tokens follow (read in the same
        # query as those tokens, so a step's start is never missed).
        Q(type=JobEventType.STEP)
        | Q(seq__gt=after, type=JobEventType.TOKEN)
        | Q(seq__gt=after, type=JobEventType.STATUS, data__status__in=ended)
    )
    names: dict[int, str] = {}
    shown: list[Row] = []
    writing = None  # the last reply step, unless its text was taken back
    for seq, kind, data in rows.order_by("seq").values_list("seq", "type", "data"):
        if kind == JobEventType.STEP:
            names[data["index"]] = data["name"]
            if data["name"] not in REPLY_STEPS:
                continue
            reason = (data.get("output") or {}).get("discarded")
            if "attempt" in data:  # a run whose worker died: the job runs it again
                reason = reason or LOST
            writing = None if reason else data["index"]
            if reason and seq > after:
                shown.append((base + seq, "discard", {"step": data["index"], "reason": reason}))
        elif kind == JobEventType.TOKEN and names.get(data["step"]) in REPLY_STEPS:
            shown.append((base + seq, "token", data))
        elif kind == JobEventType.STATUS and writing is not None:
            shown.append((base + seq, "discard", {"step": writing, "reason": data["status"]}))
    return shown


def _message(message: Message) -> dict[str, Any]:
    return dict(MessageSerializer(message).data)


def events_after(conversation_id: str, after: int) -> list[Row]:
    """The conversation's events after id ``after``, in order, as ``(id, type, data)``: up
    to the first reply not yet stored (what follows it waits for it), about
    :data:`READ_BATCH` at most. A message's data is what ``GET /agent/conversation/{id}``
    shows of it."""
    first, within = divmod(after, SLOT)
    # In this order: a chat over by now has its reply stored, which has its tokens.
    open_chats = _open_chats(conversation_id)
    messages = list(
        Message.objects.filter(conversation_id=conversation_id, seq__gte=first).order_by("seq")[
            :MESSAGE_BATCH
        ]
    )
    answered = {m.job_id for m in messages if m.role == Role.ASSISTANT}
    if len(messages) == MESSAGE_BATCH:  # the last one's reply may be in the next batch
        messages.pop()
    shown: list[Row] = []
    waiting_for = None  # the chat job whose reply comes next
    for message in messages:
        if waiting_for is not None:
            is_reply = message.job_id == waiting_for and message.role == Role.ASSISTANT
            if not is_reply and waiting_for in open_chats:
                break  # its reply is still to come: what follows waits
            waiting_for = None
        if message.seq * SLOT > after:
            shown.append((message.seq * SLOT, "message", _message(message)))
        if message.role == Role.USER and message.job_id:
            since = within if message.seq == first else 0
            reply = message.job_id in answered
            shown += _chat_events(message.job_id, message.seq * SLOT, since, answered=reply)
            waiting_for = message.job_id
        if len(shown) >= READ_BATCH:
            break
    return shown


# --- Serving ----------------------------------------------------------------------------

#: Pause before a failed read is tried again (the database away for a moment).
RETRY_SECONDS = 0.5


def _versions(ids: list[str]) -> dict[str, int]:
    """A number per conversation that grows with every message and chat job event stored
    (SQLite's poll compares them)."""
    found: dict[str, int] = defaultdict(int)
    messages = Message.objects.filter(conversation_id__in=ids).values("conversation_id")
    for row in messages.annotate(last=Max("pk")):
        found[row["conversation_id"]] += row["last"]
    job_rows = JobEvent.objects.filter(job__conversation_id__in=ids)
    for row in job_rows.values("job__conversation_id").annotate(last=Max("pk")):
        found[row["job__conversation_id"]] += row["last"]
    return found


bus.register_version("conversation", _versions)


async def _read(conversation_id: str, after: int, *, inline: bool) -> list[Row]:
    """:func:`events_after` in the bus's threads, tried again while the database is away."""
    while True:
        try:
            return await bus.db(events_after, conversation_id, after, inline=inline)
        except Exception as exc:
            logger.warning("Conversation event read failed (%s); trying again", exc)
            await asyncio.sleep(RETRY_SECONDS)


async def stream(conversation_id: str, after: int) -> AsyncIterator[bytes]:
    """The conversation's events after ``after``, then each new one once it is committed,
    for as long as the client stays; a keep-alive comment when nothing happened for
    ``EVENTS_KEEPALIVE_SECONDS``. Waiting holds no thread and no database connection: it
    awaits the bus's wake-up for the conversation (an announcement of one of its messages
    or chat job events, or SQLite's poll)."""
    async with bus.watch(f"conversation:{conversation_id}") as watched:
        while True:
            rows = await _read(conversation_id, after, inline=False)
            for event_id, type, data in rows:
                yield sse_event(event_id, type, data)
                after = event_id
            if len(rows) >= READ_BATCH:
                continue
            if not await watched.wait(settings.EVENTS_KEEPALIVE_SECONDS):
                yield KEEP_ALIVE
            watched.take()  # what was announced: the table is read again in any case


async def stored(conversation_id: str, after: int) -> AsyncIterator[bytes]:
    """The events stored so far, then the end: for a server without a lasting event loop
    (WSGI), where a stream cannot stay open. The client's ``EventSource`` reconnects after
    ``retry`` milliseconds and goes on after the last id it received."""
    yield RETRY
    for event_id, type, data in await _read(conversation_id, after, inline=True):
        yield sse_event(event_id, type, data)
