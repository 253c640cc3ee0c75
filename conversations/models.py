from django.conf import settings
from django.db import models
from django.db.models import Q

from core.ids import new_conversation_id


class Conversation(models.Model):
    """The history of one (owner, source, scope_type, scope_id)."""

    id = models.CharField(
        primary_key=True, max_length=40, default=new_conversation_id, editable=False
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    source = models.CharField(max_length=100)
    scope_type = models.CharField(max_length=100)
    scope_id = models.CharField(max_length=200)
    profile = models.ForeignKey(
        "agents.AgentProfile", on_delete=models.PROTECT, related_name="conversations"
    )
    summary = models.TextField(blank=True, help_text="Rolling summary of older messages.")
    summary_until_seq = models.PositiveIntegerField(
        default=0, help_text="The summary covers messages up to this sequence number."
    )
    summary_tokens = models.PositiveIntegerField(
        default=0, help_text="Token count of the summary, counted when it was stored."
    )
    last_seq = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-updated_at",)
        constraints = [
            models.UniqueConstraint(
                fields=("owner", "source", "scope_type", "scope_id"),
                name="one_conversation_per_scope",
            ),
            models.CheckConstraint(
                condition=Q(summary_until_seq__lte=models.F("last_seq")),
                name="summary_within_history",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.source}/{self.scope_type}/{self.scope_id})"


class Role(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class OnBusy(models.TextChoices):
    """What ``POST /agent/chat`` does when the conversation has a chat queued or running."""

    ENQUEUE = "enqueue", "Wait for it (in arrival order)"
    REJECT = "reject", "Refuse (409 conversation_busy), storing nothing"
    INTERRUPT = "interrupt", "Cancel it, then run"


class Message(models.Model):
    """One message of a conversation. ``seq`` orders a conversation's messages (1, 2, ...).

    Full-text search over ``content`` is built by migration 0003 outside the ORM: a stored
    ``search_vector`` column with a GIN index on PostgreSQL, an FTS5 table kept by triggers
    on SQLite (see ``conversations.search``).
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()
    token_estimate = models.PositiveIntegerField(default=0)
    job = models.ForeignKey(
        "agents.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="messages"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # By the column: ordering by "conversation" would join it to sort by its ordering.
        ordering = ("conversation_id", "seq")
        constraints = [
            models.UniqueConstraint(
                fields=("conversation", "seq"), name="unique_seq_per_conversation"
            ),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="message_role_valid"),
            # A chat job writes one user message and, at most once, one reply.
            models.UniqueConstraint(
                fields=("job", "role"),
                condition=Q(job__isnull=False),
                name="one_message_per_role_per_job",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} #{self.seq} {self.role}"


class MessageEmbedding(models.Model):
    """A message's embedding vector, stored compactly: ``dimension`` signed bytes, the
    vector scaled so that its largest component is 127 (cosine similarity does not
    depend on the scale). ``model`` names the backend and model that made it: search
    only compares vectors of the model in use. Deleted with its message; ``conversation``
    and ``seq`` are copies of the message's, so that a search reads this table alone."""

    message = models.OneToOneField(
        Message, on_delete=models.CASCADE, primary_key=True, related_name="embedding"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    seq = models.PositiveIntegerField()
    model = models.CharField(max_length=200)
    dimension = models.PositiveSmallIntegerField()
    vector = models.BinaryField()
    created_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=("conversation", "model", "seq"), name="embedding_by_conversation")
        ]
        constraints = [
            models.CheckConstraint(condition=Q(dimension__gt=0), name="embedding_dimension_set"),
        ]

    def __str__(self) -> str:
        return f"{self.message_id} {self.model} ({self.dimension})"


class EmbeddingCatchUp(models.Model):
    """How far back the catch-up still has to look for messages without a vector of
    ``model``: every message with an id below ``below_id`` had one when it was last
    checked. The catch-up reads only the messages from ``below_id`` on; it moves the
    mark forward after a pass that found nothing missing, but never past a message
    stored less than ``conversations.vectors.CATCH_UP_GRACE`` before (a transaction
    still open then could commit a message with a smaller id afterwards)."""

    model = models.CharField(max_length=200, primary_key=True)
    below_id = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.model} below {self.below_id}"
