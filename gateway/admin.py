from django import forms
from django.contrib import admin, messages
from django.db import models

from gateway import services
from gateway.admin_base import HistoryAdmin
from gateway.models import ApiKey, ModelRoute, RuntimeEndpoint, Scope, UsageRecord


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
            "expires_at",
        )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["allowed_models"] = ", ".join(self.instance.allowed_models)

    def clean_allowed_models(self) -> list[str]:
        raw = self.cleaned_data.get("allowed_models") or ""
        return [m.strip() for m in raw.split(",") if m.strip()]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = (
        "name",
        "owner",
        "prefix",
        "scope_list",
        "rate_limit_per_minute",
        "expires_at",
        "revoked_at",
        "last_used_at",
        "created_at",
    )
    list_filter = ("revoked_at", "created_at")
    search_fields = ("name", "prefix", "owner__username")
    list_select_related = ("owner",)
    readonly_fields = ("prefix", "revoked_at", "last_used_at", "created_at")
    actions = ("revoke_selected",)

    @admin.display(description="scopes")
    def scope_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes)

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        data = form.cleaned_data
        created, plain = services.api_key_create(
            name=data["name"],
            owner=data["owner"],
            scopes=data["scopes"],
            allowed_models=data["allowed_models"],
            rate_limit_per_minute=data["rate_limit_per_minute"],
            expires_at=data["expires_at"],
        )
        # The admin goes on with `obj` (history entry, redirect): make it the saved row.
        obj.__dict__.update(created.__dict__)
        self.message_user(
            request,
            f"The new key, shown this once only; copy it now: {plain}",
            level=messages.WARNING,
        )

    def save_form(self, request, form, change):
        if change:
            return super().save_form(request, form, change)
        return form.save(commit=False)

    @admin.action(description="Revoke selected keys (permanent)")
    def revoke_selected(self, request, queryset):
        revoked = sum(services.api_key_revoke(api_key=key) for key in queryset)
        self.message_user(request, f"Revoked {revoked} key(s).")


class ModelRouteInline(admin.TabularInline):
    model = ModelRoute
    extra = 1


@admin.register(RuntimeEndpoint)
class RuntimeEndpointAdmin(admin.ModelAdmin):
    # "10.0.0.5:11434" means http: runtimes rarely speak TLS (Django 6 would assume https).
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    list_display = ("name", "base_url", "api", "enabled", "created_at")
    list_filter = ("api", "enabled")
    search_fields = ("name", "base_url")
    inlines = (ModelRouteInline,)


@admin.register(ModelRoute)
class ModelRouteAdmin(admin.ModelAdmin):
    list_display = ("model", "endpoint", "upstream_model", "enabled")
    list_filter = ("enabled", "endpoint")
    search_fields = ("model", "upstream_model")
    list_select_related = ("endpoint",)


@admin.register(UsageRecord)
class UsageRecordAdmin(HistoryAdmin):
    list_display = (
        "created_at",
        "api_key",
        "origin",
        "model",
        "endpoint",
        "status",
        "error",
        "elapsed",
        "prompt_tokens",
        "completion_tokens",
    )
    list_filter = ("status", "origin", "model", "created_at", "api_key")
    search_fields = ("model", "job_id", "api_key__name", "api_key__prefix")
    list_select_related = ("api_key",)
    date_hierarchy = "created_at"
