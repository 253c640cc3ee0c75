"""The shapes of a conversation stream's server-sent events, for the schema (the stream is
written by ``conversations.events``, its messages by the serializer GET
/agent/conversation/{id} answers with)."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from agents.event_serializers import TokenEventSerializer
from conversations.serializers import MessageSerializer


class DiscardEventSerializer(serializers.Serializer):
    step = serializers.IntegerField(help_text="The reply step whose text is taken back.")
    reason = serializers.CharField(
        help_text="Why: `borrowed`, `tool_call`, `unusable` (the step's `output.discarded`), "
        "`attempt_lost` (its worker died; the job runs again), or `failed` / `cancelled` "
        "(the chat ended without a reply)."
    )


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="ConversationEventData",
        serializers=[MessageSerializer, TokenEventSerializer, DiscardEventSerializer],
        resource_type_field_name=None,
    )
)
class ConversationEventDataField(serializers.DictField):
    """The JSON of an event's ``data:`` line, by its type."""


class ConversationStreamEventSerializer(serializers.Serializer):
    """One server-sent event (its lines ``id:``, ``event:``, ``data:``)."""

    id = serializers.IntegerField(
        min_value=1,
        help_text="Strictly increasing within the conversation: a message's is its `seq` x "
        "1,000,000; the events of the reply it asked for follow it.",
    )
    event = serializers.ChoiceField(choices=["message", "token", "discard"])
    data = ConversationEventDataField()
