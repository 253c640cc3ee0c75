from django.conf import settings
from django.db import models
from django.db.models import Q

from core.ids import new_job_id


class PromptStyle(models.TextChoices):
    """How the agent writes its context for the model.

    ``transcript``: one plain-text transcript that a base model continues (no tool list:
    a base model cannot follow one, and copies it instead). ``chat``: chat messages for an
    instruction-tuned model (Ollama ``/api/chat``, ``/v1/chat/completions``), tools listed.
    """

    TRANSCRIPT = "transcript", "Transcript (base models that continue text)"
    CHAT = "chat", "Chat messages (instruction-tuned models)"


class AgentProfile(models.Model):
    """How an agent works: its model, how it is prompted, options, system prompt, context
    budget and tools."""

    name = models.SlugField(max_length=50, unique=True)
    description = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200)
    prompt_style = models.CharField(
        max_length=12,
        choices=PromptStyle.choices,
        default=PromptStyle.TRANSCRIPT,
        help_text="Transcript for base models, chat messages for instruction-tuned ones.",
    )
    options = models.JSONField(
        default=dict, blank=True, help_text="Runtime options (Ollama names)."
    )
    system_prompt = models.TextField(blank=True)
    task_prompt = models.TextField(
        blank=True,
        help_text="What task jobs' prompts start with (the system prompt when blank): the "
        "system prompt of chats may carry an example conversation that a task has no use for.",
    )
    unknown_reply = models.CharField(
        max_length=200,
        blank=True,
        default="I don't know.",
        help_text="A chat's reply to a question when the model's answers, asked again, kept "
        "borrowing from the prompt (its example's facts, the previous reply, a value the user "
        'never gave); left blank, "I don\'t know."',
    )
    acknowledgement_reply = models.CharField(
        max_length=200,
        blank=True,
        default="Thanks for telling me.",
        help_text="A chat's reply to anything but a question (a statement, an introduction) "
        "when the model's answers, asked again, kept borrowing from the prompt or speaking "
        'as someone other than the assistant; left blank, "Thanks for telling me."',
    )
    context_window = models.PositiveIntegerField(
        default=2048, help_text="Tokens the model can read: prompt and answer together."
    )
    answer_reserve = models.PositiveIntegerField(
        default=256, help_text="Tokens kept free for the answer."
    )
    max_steps = models.PositiveSmallIntegerField(
        default=6, help_text="Model calls per job at most (each tool round costs one)."
    )
    tools = models.JSONField(default=list, blank=True, help_text="Names of the enabled tools.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        constraints = [
            models.CheckConstraint(
                condition=Q(answer_reserve__lt=models.F("context_window")),
                name="profile_reserve_below_window",
            ),
            models.CheckConstraint(condition=Q(max_steps__gte=1), name="profile_max_steps_min_1"),
            models.CheckConstraint(
                condition=Q(prompt_style__in=PromptStyle.values), name="profile_prompt_style_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_transcript(self) -> bool:
        return self.prompt_style == PromptStyle.TRANSCRIPT

    @property
    def prompt_budget(self) -> int:
        return self.context_window - self.answer_reserve


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    CANCELLING = "cancelling"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELLED)
ACTIVE = (JobStatus.RUNNING, JobStatus.CANCELLING)


class JobKind(models.TextChoices):
    TASK = "task"
    CHAT = "chat"


class Job(models.Model):
    """One unit of agent work. This row, not the queue message, is the truth about it."""

    id = models.CharField(primary_key=True, max_length=40, default=new_job_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs"
    )
    api_key = models.ForeignKey("gateway.ApiKey", on_delete=models.PROTECT, related_name="jobs")
    kind = models.CharField(max_length=8, choices=JobKind.choices)
    source = models.CharField(max_length=100)
    scope_type = models.CharField(max_length=100)
    scope_id = models.CharField(max_length=200)
    task = models.TextField(blank=True)
    profile = models.ForeignKey(AgentProfile, on_delete=models.PROTECT, related_name="jobs")
    conversation = models.ForeignKey(
        "conversations.Conversation",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="jobs",
    )
    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.QUEUED)
    final_result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    webhook = models.CharField(max_length=2000, blank=True, help_text="Where events are sent.")
    webhook_events = models.JSONField(default=list, blank=True)
    # The id of the request that started the job (its log lines and model calls carry it),
    # and that request's W3C traceparent when traces are on (core.tracing).
    request_id = models.CharField(max_length=128, blank=True, default="")
    trace_context = models.CharField(max_length=64, blank=True, default="")
    # Where the job stands in the fair order of claims across owners (agents.fairness).
    fair_key = models.BigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ("-created_at",)
        indexes = [
            models.Index(fields=("owner", "-created_at"), name="job_owner_created"),
            models.Index(fields=("status", "fair_key", "created_at"), name="job_status_fair"),
            models.Index(fields=("owner", "status", "fair_key"), name="job_owner_status_fair"),
            models.Index(fields=("status", "lease_expires_at"), name="job_status_lease"),
            models.Index(
                fields=("conversation", "status", "created_at"), name="job_conversation_status"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="job_status_valid"
            ),
            models.CheckConstraint(condition=Q(kind__in=JobKind.values), name="job_kind_valid"),
            # finished_at is set exactly when the job is over.
            models.CheckConstraint(
                condition=(Q(status__in=TERMINAL) & Q(finished_at__isnull=False))
                | (~Q(status__in=TERMINAL) & Q(finished_at__isnull=True)),
                name="job_finished_at_iff_terminal",
            ),
            # A running job always has the worker that holds it.
            models.CheckConstraint(
                condition=~Q(status__in=ACTIVE)
                | (~Q(lease_owner="") & Q(lease_expires_at__isnull=False)),
                name="job_active_has_lease",
            ),
            models.CheckConstraint(
                condition=~Q(kind=JobKind.CHAT) | Q(conversation__isnull=False),
                name="job_chat_has_conversation",
            ),
            # One chat at a time per conversation.
            models.UniqueConstraint(
                fields=("conversation",),
                condition=Q(kind=JobKind.CHAT) & Q(status__in=ACTIVE),
                name="one_active_chat_per_conversation",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL


class StepKind(models.TextChoices):
    MODEL_CALL = "model_call"
    TOOL_CALL = "tool_call"
    CONTEXT = "context"
    NOTE = "note"


class StepStatus(models.TextChoices):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Step(models.Model):
    """One thing a job did: a model call, a tool call, building its context, or a note."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=StepKind.choices)
    name = models.CharField(max_length=100)
    status = models.CharField(max_length=12, choices=StepStatus.choices, default=StepStatus.RUNNING)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    elapsed = models.FloatField(null=True, blank=True, help_text="Seconds.")

    class Meta:
        ordering = ("job", "index")
        constraints = [
            models.UniqueConstraint(fields=("job", "index"), name="unique_step_index_per_job"),
            models.CheckConstraint(condition=Q(kind__in=StepKind.values), name="step_kind_valid"),
            models.CheckConstraint(
                condition=Q(status__in=StepStatus.values), name="step_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} #{self.index} {self.kind}:{self.name}"


class IdempotencyKey(models.Model):
    """The stored answer of a request made with an ``Idempotency-Key`` (agents/idempotency.py),
    written in the transaction of the work the request did."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(
        max_length=64, help_text="SHA-256 of the method, path and canonical JSON body."
    )
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=300)
    status_code = models.PositiveSmallIntegerField(default=0)
    body = models.TextField(blank=True, help_text="The answer's body, as sent.")
    headers = models.JSONField(default=dict, blank=True)
    job_id = models.CharField(max_length=40, blank=True, help_text="The job the request made.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            models.UniqueConstraint(fields=("owner", "key"), name="one_idempotency_key_per_owner")
        ]
        indexes = [models.Index(fields=("expires_at",), name="idempotency_expires")]

    def __str__(self) -> str:
        return self.key


# The webhooks' tables (agents/webhook_models.py); imported here so that Django finds them.
from agents.event_models import JobEvent, JobEventType  # noqa: E402, F401
from agents.webhook_models import (  # noqa: E402, F401
    WebhookAttempt,
    WebhookDelivery,
    WebhookSecret,
)
