"""Reads of conversations and messages. Every message read goes through the unique
index on ``(conversation, seq)`` and reads a bounded number of rows."""

from typing import Any

from agents.models import Job, JobKind
from conversations.models import Conversation, Message, Role
from core import ids
from core.exceptions import ConversationNotFound

MESSAGE_FIELDS = ("seq", "role", "content", "token_estimate", "created_at")


def conversation_get_for_owner(*, conversation_id: str, owner_id: int) -> Conversation:
    """The conversation if it belongs to ``owner_id``; :class:`ConversationNotFound`
    otherwise, whether it is another owner's or does not exist."""
    conversation = (
        Conversation.objects.filter(pk=conversation_id, owner_id=owner_id).first()
        if ids.is_conversation_id(conversation_id)
        else None
    )
    if conversation is None:
        raise ConversationNotFound(conversation_id)
    return conversation


def conversation_get(conversation_id: str) -> Conversation:
    return Conversation.objects.get(pk=conversation_id)


def conversation_view(
    conversation: Conversation, *, limit: int | None = None, before: int | None = None
) -> dict[str, Any]:
    """The ``data`` of ``GET /agent/conversation/{id}``: messages in order.

    With ``before`` only messages with a smaller seq; with ``limit`` only the last
    ``limit`` of those (the newest page). ``has_more`` tells whether older ones exist;
    the next page is ``before=<seq of the first message>``. Rows are read as tuples, not
    model instances; ``ConversationResponseSerializer`` renders the dict.
    """
    rows = Message.objects.filter(conversation_id=conversation.pk)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    fields = ("role", "content", "created_at", "seq")
    if limit is None:
        page = list(rows.order_by("seq").values_list(*fields))
        has_more = False
    else:
        page = list(rows.order_by("-seq").values_list(*fields)[: limit + 1])
        has_more = len(page) > limit
        page = page[:limit][::-1]
    return {
        "conversation_id": conversation.pk,
        "source": conversation.source,
        "scope_type": conversation.scope_type,
        "scope_id": conversation.scope_id,
        "messages": [
            {"role": role, "content": content, "created_at": created, "seq": seq}
            for role, content, created, seq in page
        ],
        "has_more": has_more,
    }


# --- For the chat agent and the history tools ----------------------------------------------


def message_of_job(job: Job, role: str) -> Message | None:
    return Message.objects.filter(job=job, role=role).first()


def messages_of_job(job: Job) -> dict[str, Message]:
    """The job's messages by role (a chat job has its user's, then its reply), in one read."""
    return {message.role: message for message in Message.objects.filter(job=job)}


def history_scope(job: Job) -> tuple[str, int | None] | None:
    """Which messages a job's history tools may read: ``(conversation_id, before_seq)``.

    A chat job reads its conversation before its own message (later messages are later
    chats'). A task job reads the conversation of its scope, all of it (issue item 9).
    None when there is no such conversation.
    """
    if job.kind == JobKind.CHAT:
        seq = Message.objects.filter(job=job, role=Role.USER).values_list("seq", flat=True)
        return job.conversation_id, seq.first()
    conversation_id = job.conversation_id or (
        Conversation.objects.filter(
            owner_id=job.owner_id,
            source=job.source,
            scope_type=job.scope_type,
            scope_id=job.scope_id,
        )
        .values_list("pk", flat=True)
        .first()
    )
    return (conversation_id, None) if conversation_id else None


def messages_before(
    *, conversation_id: str, before_seq: int | None, limit: int
) -> list[dict[str, Any]]:
    """The ``limit`` messages just before ``before_seq``, newest first."""
    rows = Message.objects.filter(conversation_id=conversation_id)
    if before_seq is not None:
        rows = rows.filter(seq__lt=before_seq)
    return list(rows.order_by("-seq").values(*MESSAGE_FIELDS)[:limit])


def messages_older_than(*, conversation_id: str, seq: int) -> int:
    """How many messages have a smaller ``seq``: the stored count less a count over the
    index range from ``seq`` on, which the caller knows to be short (the prompt's window
    and the chats queued after it), so no count runs over the whole history."""
    total = Conversation.objects.filter(pk=conversation_id).values_list("message_count", flat=True)
    newer = Message.objects.filter(conversation_id=conversation_id, seq__gte=seq).count()
    return max(0, (total.first() or 0) - newer)


def messages_between(
    *, conversation_id: str, after_seq: int, before_seq: int, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` messages with ``after_seq < seq < before_seq``, oldest first."""
    rows = Message.objects.filter(
        conversation_id=conversation_id, seq__gt=after_seq, seq__lt=before_seq
    )
    return list(rows.order_by("seq").values(*MESSAGE_FIELDS)[:limit])


def messages_at(*, conversation_id: str, seqs: list[int]) -> list[dict[str, Any]]:
    """The conversation's messages with these seqs (those that exist), in ``seq`` order."""
    rows = Message.objects.filter(conversation_id=conversation_id, seq__in=seqs)
    return list(rows.order_by("seq").values(*MESSAGE_FIELDS))
