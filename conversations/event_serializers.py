"""The shapes of a conversation stream's server-sent events, for the schema (the stream is
written by ``conversations.events``, its messages by the serializer GET
/agent/conversation/{id} answers with)."""

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from agents.event_serializers import TokenEventSerializer
from conversations.serializers import MessageSerializer


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="ConversationEventData",
        serializers=[MessageSerializer, TokenEventSerializer],
        resource_type_field_name=None,
    )
)
class ConversationEventDataField(serializers.DictField):
    """The JSON of an event's ``data:`` line, by its type."""


class ConversationStreamEventSerializer(serializers.Serializer):
    """One server-sent event (its lines ``id:``, ``event:``, ``data:``)."""

    id = serializers.IntegerField(
        min_value=1, help_text="Strictly increasing within the conversation."
    )
    event = serializers.ChoiceField(choices=["message", "token"])
    data = ConversationEventDataField()
