from django import forms
from django.conf import settings
from django.contrib import admin
from django.db import models
from django.db.models import Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from core.admin import HistoryAdmin, ServiceAdmin
from gateway import services
from gateway.models import ApiKey, BudgetPeriod, ModelRoute, RuntimeEndpoint, Scope, UsageRecord


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=Scope.values
    )
    allowed_models = forms.CharField(
        required=False, help_text="Comma-separated model names; empty means every model."
    )

    class Meta:
        model = ApiKey
        fields = (
            "name",
            "owner",
            "scopes",
            "allowed_models",
            "rate_limit_per_minute",
            "agent_starts_per_minute",
            "agent_reads_per_minute",
            "max_active_jobs",
            "token_budget",
            "budget_period",
            "expires_at",
        )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["budget_period"].required = False
        if self.instance.pk:
            self.initial["allowed_models"] = ", ".join(self.instance.allowed_models)
        else:
            # The same default as create_api_key: one setting, read when the form is made.
            self.initial["rate_limit_per_minute"] = settings.DEFAULT_KEY_RATE_LIMIT
            self.initial["agent_starts_per_minute"] = settings.DEFAULT_KEY_AGENT_STARTS_PER_MINUTE
            self.initial["agent_reads_per_minute"] = settings.DEFAULT_KEY_AGENT_READS_PER_MINUTE
            self.initial["max_active_jobs"] = settings.DEFAULT_KEY_MAX_ACTIVE_JOBS

    def clean_budget_period(self) -> str:
        # Asked only with a budget: a form without it keeps the default.
        return self.cleaned_data.get("budget_period") or BudgetPeriod.MONTH

    def clean_allowed_models(self) -> list[str]:
        raw = self.cleaned_data.get("allowed_models") or ""
        return [m.strip() for m in raw.split(",") if m.strip()]


@admin.register(ApiKey)
class ApiKeyAdmin(ServiceAdmin):
    form = ApiKeyForm
    list_display = (
        "name",
        "owner",
        "prefix",
        "scope_list",
        "rate_limit_per_minute",
        "state",
        "last_used_at",
        "calls",
        "tokens",
        "created_at",
    )
    list_filter = ("revoked_at", "created_at")
    search_fields = ("name", "prefix", "owner__username")
    list_select_related = ("owner",)
    readonly_fields = ("prefix", "revoked_at", "last_used_at", "created_at", "calls", "tokens")
    actions = ("revoke_selected",)

    def get_queryset(self, request):
        usage = UsageRecord.objects.filter(api_key=OuterRef("pk")).order_by().values("api_key")
        tokens = Coalesce(F("prompt_tokens"), 0) + Coalesce(F("completion_tokens"), 0)
        return (
            super()
            .get_queryset(request)
            .annotate(
                calls_total=Coalesce(Subquery(usage.annotate(n=Count("id")).values("n")), 0),
                tokens_total=Coalesce(Subquery(usage.annotate(n=Sum(tokens)).values("n")), 0),
            )
        )

    @admin.display(description="scopes")
    def scope_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes)

    @admin.display(description="state")
    def state(self, obj: ApiKey) -> str:
        if obj.revoked_at:
            return f"revoked {obj.revoked_at:%Y-%m-%d %H:%M:%S}"
        if obj.expires_at and obj.expires_at <= timezone.now():
            return f"expired {obj.expires_at:%Y-%m-%d %H:%M:%S}"
        return f"live until {obj.expires_at:%Y-%m-%d %H:%M:%S}" if obj.expires_at else "live"

    @admin.display(description="calls", ordering="calls_total")
    def calls(self, obj: ApiKey) -> int:
        return getattr(obj, "calls_total", 0)

    @admin.display(description="tokens", ordering="tokens_total")
    def tokens(self, obj: ApiKey) -> int:
        return getattr(obj, "tokens_total", 0)

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # The form's fields are named as the service's arguments.
        data = form.cleaned_data
        created, plain = services.api_key_create(
            **{name: data[name] for name in ApiKeyForm.Meta.fields}
        )
        # The admin goes on with `obj` (history entry, then response_add): make it the saved
        # row. The plain key rides along in memory to the one page that shows it.
        obj.__dict__.update(created.__dict__)
        obj.plain_key = plain

    def save_form(self, request, form, change):
        if change:
            return super().save_form(request, form, change)
        return form.save(commit=False)

    def response_add(self, request, obj, post_url_continue=None):
        """The page that shows the new key, once: it is rendered, not redirected to, so the
        plain key is in this one answer only (no message cookie or session holds it)."""
        context = {
            **self.admin_site.each_context(request),
            "title": "New API key",
            "opts": self.opts,
            "api_key": obj,
            "plain_key": obj.plain_key,
        }
        response = TemplateResponse(request, "admin/gateway/apikey/created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected keys (permanent)")
    def revoke_selected(self, request, queryset):
        """Asks for confirmation first, as deleting does; revoking cannot be undone."""
        if request.POST.get("post") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "title": "Revoke API keys?",
                "opts": self.opts,
                "keys": list(queryset),
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "admin/gateway/apikey/revoke_confirmation.html", context
            )
        revoked = sum(services.api_key_revoke(api_key=key) for key in queryset)
        self.message_user(request, f"Revoked {revoked} key(s).")
        return None


class ModelRouteInline(admin.TabularInline):
    model = ModelRoute
    extra = 1


@admin.register(RuntimeEndpoint)
class RuntimeEndpointAdmin(ServiceAdmin):
    # "10.0.0.5:11434" means http: runtimes rarely speak TLS (Django 6 would assume https).
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    list_display = ("name", "base_url", "api", "enabled", "max_context", "max_predict")
    list_filter = ("api", "enabled")
    search_fields = ("name", "base_url")
    inlines = (ModelRouteInline,)


@admin.register(ModelRoute)
class ModelRouteAdmin(ServiceAdmin):
    list_display = ("model", "endpoint", "upstream_model", "enabled")
    list_filter = ("enabled", "endpoint")
    search_fields = ("model", "upstream_model")
    list_select_related = ("endpoint",)


@admin.register(UsageRecord)
class UsageRecordAdmin(HistoryAdmin):
    """Narrow list (it fits 1,400 px); the origin, endpoint and sizes are on each record."""

    list_display = (
        "created_at",
        "key_name",
        "model",
        "status_colour",
        "elapsed",
        "tokens",
        "job_link",
    )
    list_filter = ("api_key", "model", "status", "origin", "created_at")
    search_fields = ("model", "job_id", "api_key__name", "api_key__prefix")
    list_select_related = ("api_key",)
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "api_key",
        "origin",
        "job_link",
        "model",
        "endpoint",
        "status_colour",
        "elapsed",
        "prompt_chars",
        "response_chars",
        "prompt_tokens",
        "completion_tokens",
        "tokens_estimated",
    )
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_colour(self, obj: UsageRecord) -> str:
        if obj.status < 400:
            return format_html('<span class="http-ok">{}</span>', obj.status)
        return format_html('<span class="http-error">{} {}</span>', obj.status, obj.error)

    @admin.display(description="key", ordering="api_key__name")
    def key_name(self, obj: UsageRecord) -> str:
        return obj.api_key.name

    @admin.display(description="tokens in + out")
    def tokens(self, obj: UsageRecord) -> str:
        if obj.prompt_tokens is None and obj.completion_tokens is None:
            return "-"
        counts = f"{obj.prompt_tokens or 0} + {obj.completion_tokens or 0}"
        # "≈": the runtime reported none; counted afterwards with the model's tokenizer
        return f"\u2248 {counts}" if obj.tokens_estimated else counts

    @admin.display(description="job", ordering="job_id")
    def job_link(self, obj: UsageRecord) -> str:
        if not obj.job_id:
            return "-"
        url = reverse("admin:agents_job_change", args=[obj.job_id])
        return format_html('<a href="{}">{}</a>', url, obj.job_id)
