"""The shape of a conversation stream's server-sent events, for the schema (the stream is
written by ``conversations.events``, its messages by the serializer GET
/agent/conversation/{id} answers with). As for a job's stream, the fields are those an SSE
client reads, text: ``id``, ``event``, and ``data``, one line of JSON."""

from rest_framework import serializers


class ConversationStreamEventSerializer(serializers.Serializer):
    """One server-sent event, its fields as an SSE client reads them (text): ``id``,
    ``event``, and ``data``, one line of JSON."""

    id = serializers.RegexField(
        r"^[1-9][0-9]*$",
        help_text="Strictly increasing within the conversation: a message's is its `seq` x "
        "1,000,000; the events of the reply it asked for follow it.",
    )
    event = serializers.ChoiceField(choices=["message", "token", "discard"])
    data = serializers.CharField(
        help_text="JSON. `message`: {role, content, created_at, seq}, as GET "
        "/agent/conversation/{id} shows a message; `token`: {step, text}, the next piece of the "
        "reply being written; `discard`: {step, reason}, the reply step whose text is taken "
        "back, and why: `borrowed`, `tool_call`, `unusable`, `quoted` (the step's "
        "`output.discarded`), "
        "`attempt_lost` (its worker died; the job runs again), or `failed` / `cancelled` (the "
        "chat ended without a reply)."
    )
