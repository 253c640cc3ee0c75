from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from gateway.options import LOAD_OPTIONS, OptionLimits


class Scope(models.TextChoices):
    MODEL = "model", "Model endpoint (/api.php)"
    AGENT = "agent", "Agents (/agent/...)"


class BudgetPeriod(models.TextChoices):
    DAY = "day", "Day (UTC)"
    MONTH = "month", "Month (UTC)"


class ApiKey(models.Model):
    """A client credential. Only a SHA-256 digest of the secret is stored.

    The plain key (``llmgw_<prefix>_<secret>``) exists once, when it is created; ``prefix``
    finds the row and the digest of the whole key is compared in constant time.
    """

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list, help_text='Any of "model" and "agent".')
    allowed_models = models.JSONField(
        default=list, blank=True, help_text="Model names this key may use; empty means all."
    )
    rate_limit_per_minute = models.PositiveIntegerField(
        default=0, help_text="Requests per minute; 0 means unlimited."
    )
    agent_starts_per_minute = models.PositiveIntegerField(
        default=0,
        help_text="POST requests to /agent/... per minute (job starts, chats, cancels); "
        "0 means unlimited.",
    )
    agent_reads_per_minute = models.PositiveIntegerField(
        default=0, help_text="GET requests to /agent/... per minute; 0 means unlimited."
    )
    max_active_jobs = models.PositiveIntegerField(
        default=0, help_text="Jobs queued or running at once; 0 means unlimited."
    )
    token_budget = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="Prompt plus completion tokens per budget period; empty means unlimited.",
    )
    budget_period = models.CharField(
        max_length=8, choices=BudgetPeriod.choices, default=BudgetPeriod.MONTH
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "API key"
        ordering = ("-created_at",)
        constraints = [
            models.CheckConstraint(
                condition=Q(budget_period__in=BudgetPeriod.values), name="key_budget_period_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (llmgw_{self.prefix}_…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class RuntimeApi(models.TextChoices):
    OLLAMA = "ollama", "Ollama (/api/generate)"
    OPENAI = "openai", "OpenAI-compatible completions (/v1/completions)"
    OPENAI_CHAT = "openai-chat", "OpenAI-compatible chat (/v1/chat/completions)"


class RuntimeEndpoint(models.Model):
    """One model runtime server (an Ollama, llama.cpp or vLLM instance)."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.URLField(help_text="For example http://10.0.0.5:11434 (no path).")
    api = models.CharField(max_length=16, choices=RuntimeApi.choices, default=RuntimeApi.OLLAMA)
    api_key = models.CharField(
        max_length=200, blank=True, help_text="Bearer token the runtime expects, if any."
    )
    enabled = models.BooleanField(default=True)
    max_context = models.PositiveIntegerField(
        default=8192, help_text="The largest num_ctx a client may ask for (the models' context)."
    )
    max_predict = models.PositiveIntegerField(
        default=4096, help_text="The largest num_predict a client may ask for (-1 and -2 too)."
    )
    allowed_load_options = models.JSONField(
        default=list,
        blank=True,
        help_text=f"Options that choose how a model loads which clients may set: any of "
        f"{', '.join(LOAD_OPTIONS)}. Empty: all refused.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return f"{self.name} ({self.base_url})"

    def clean(self) -> None:
        allowed = self.allowed_load_options
        if not isinstance(allowed, list) or not set(allowed) <= set(LOAD_OPTIONS):
            raise ValidationError(
                {"allowed_load_options": f"A list of any of: {', '.join(LOAD_OPTIONS)}."}
            )

    def option_limits(self) -> OptionLimits:
        return OptionLimits(
            max_context=self.max_context,
            max_predict=self.max_predict,
            allowed_load_options=frozenset(self.allowed_load_options or []),
        )


class ModelRoute(models.Model):
    """Serves ``model`` from ``endpoint``; several routes for one model are used in turn."""

    model = models.CharField(max_length=200, db_index=True)
    endpoint = models.ForeignKey(RuntimeEndpoint, on_delete=models.CASCADE, related_name="routes")
    upstream_model = models.CharField(
        max_length=200, blank=True, help_text="Name at the runtime, if it differs from model."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ("model", "endpoint__name")
        constraints = [
            models.UniqueConstraint(fields=("model", "endpoint"), name="unique_model_per_endpoint")
        ]

    def __str__(self) -> str:
        return f"{self.model} → {self.endpoint.name}"


class UsageRecord(models.Model):
    """Metadata of one model call. Never the prompt or the response text."""

    class Origin(models.TextChoices):
        API = "api", "/api.php"
        OPENAI = "openai", "/v1/ (OpenAI-compatible)"
        AGENT = "agent", "Agent"

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="usage")
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.API)
    job_id = models.CharField(max_length=40, blank=True, db_index=True)
    model = models.CharField(max_length=200)
    endpoint = models.CharField(max_length=300, blank=True)
    status = models.PositiveSmallIntegerField()
    error = models.CharField(max_length=50, blank=True)
    elapsed = models.FloatField(help_text="Seconds.")
    prompt_chars = models.PositiveIntegerField(default=0)
    response_chars = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    tokens_estimated = models.BooleanField(
        default=False,
        help_text="The runtime reported no token counts: they were counted afterwards with "
        "the model's tokenizer (the prompt's text, without a chat template's tokens).",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ("-created_at",)
        indexes = [models.Index(fields=("api_key", "created_at"), name="usage_key_created")]

    def __str__(self) -> str:
        return f"{self.model} {self.status} {self.created_at:%Y-%m-%d %H:%M:%S}"


class RateLimitWindow(models.Model):
    """Requests of one key in one fixed one-minute window, shared by every process."""

    class Bucket(models.TextChoices):
        MODEL = "model", "Model calls"
        AGENT_START = "agent_start", "Agent API writes"
        AGENT_READ = "agent_read", "Agent API reads"

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    bucket = models.CharField(max_length=16, choices=Bucket.choices, default=Bucket.MODEL)
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("api_key", "bucket", "window_start"), name="one_window_per_key_bucket"
            ),
            models.CheckConstraint(condition=Q(count__gte=0), name="window_count_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.api_key_id} @ {self.window_start:%H:%M}: {self.count}"


class BudgetWindow(models.Model):
    """The tokens one key spent in one budget period (gateway.budgets), shared by every
    process: added to with ``UPDATE ... SET tokens = tokens + n`` as each call is recorded."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    period = models.CharField(max_length=8, choices=BudgetPeriod.choices)
    period_start = models.DateTimeField()
    tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("api_key", "period", "period_start"), name="one_budget_window_per_period"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.api_key_id} {self.period} {self.period_start:%Y-%m-%d}: {self.tokens}"
