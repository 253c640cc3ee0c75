from typing import Any

from rest_framework import serializers

from agents.serializers import JobStartDataSerializer, ScopedRequestSerializer
from conversations.models import OnBusy, Role
from core.fields import ConstantField, IsoDateTimeField, LimitedTextField

PAGE_LIMIT_MAX = 1000


class ChatRequestSerializer(ScopedRequestSerializer):
    prompt = LimitedTextField(
        limit_setting="AGENT_PROMPT_MAX_CHARS",
        help_text="At most AGENT_PROMPT_MAX_CHARS characters (32,000 by default): "
        "413 payload_too_large with details.max_chars past it.",
    )
    on_busy = serializers.ChoiceField(
        choices=OnBusy.choices,
        default=OnBusy.ENQUEUE,
        help_text="When the conversation has a chat queued or running: `enqueue` (wait for "
        "it), `reject` (409 conversation_busy, nothing stored) or `interrupt` (cancel it as "
        "a cancel would, then run; its user message stays, unanswered).",
    )


class ChatStartDataSerializer(JobStartDataSerializer):
    conversation_id = serializers.CharField()


class ChatStartResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = ChatStartDataSerializer(source="*")


class ConversationQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(
        min_value=1,
        max_value=PAGE_LIMIT_MAX,
        required=False,
        help_text="Only the last N messages (before `before`, if given).",
    )
    before = serializers.IntegerField(
        min_value=1, required=False, help_text="Only messages with a smaller `seq`."
    )

    def to_internal_value(self, data: Any) -> Any:
        """An empty ``?limit=`` is a mistake, not an absent limit (DRF would drop it)."""
        blank = {
            name: ["This field may not be blank."] for name in self.fields if data.get(name) == ""
        }
        if blank:
            raise serializers.ValidationError(blank)
        return super().to_internal_value(data)


class MessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)
    content = serializers.CharField()
    created_at = IsoDateTimeField()
    seq = serializers.IntegerField(help_text="Position in the conversation: 1, 2, ...")


class ConversationDataSerializer(serializers.Serializer):
    conversation_id = serializers.CharField()
    source = serializers.CharField()
    scope_type = serializers.CharField()
    scope_id = serializers.CharField()
    messages = MessageSerializer(many=True)
    has_more = serializers.BooleanField(
        help_text="Older messages exist; ask again with `before` = the first message's seq."
    )


class ConversationResponseSerializer(serializers.Serializer):
    ok = ConstantField(True)
    data = ConversationDataSerializer(source="*")
