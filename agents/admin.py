from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from agents import services
from agents.models import AgentProfile, Job, Step
from gateway.admin_base import HistoryAdmin
from gateway.errors import ApiError


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "context_window", "answer_reserve", "max_steps", "updated_at")
    search_fields = ("name", "model", "description")


class StepInline(admin.TabularInline):
    model = Step
    fields = ("index", "kind", "name", "status", "elapsed", "started_at", "input", "output")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "status",
        "owner",
        "source",
        "scope_type",
        "scope_id",
        "profile",
        "attempts",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "kind", "source", "scope_type", "created_at")
    search_fields = ("id", "scope_id")
    list_select_related = ("owner", "profile")
    date_hierarchy = "created_at"
    readonly_fields = (
        "id",
        "owner",
        "key_link",
        "kind",
        "source",
        "scope_type",
        "scope_id",
        "task",
        "profile",
        "conversation_link",
        "status",
        "final_result",
        "error",
        "created_at",
        "enqueued_at",
        "started_at",
        "finished_at",
        "attempts",
        "lease_owner",
        "lease_expires_at",
        "heartbeat_at",
        "cancel_requested_at",
    )
    exclude = ("api_key", "conversation")
    inlines = (StepInline,)
    actions = ("cancel_selected",)

    def has_add_permission(self, request):
        return False

    @admin.display(description="API key")
    def key_link(self, obj: Job) -> str:
        url = reverse("admin:gateway_apikey_change", args=[obj.api_key_id])
        return format_html('<a href="{}">{}</a>', url, obj.api_key)

    @admin.display(description="conversation")
    def conversation_link(self, obj: Job) -> str:
        if not obj.conversation_id:
            return "-"
        url = reverse("admin:conversations_conversation_change", args=[obj.conversation_id])
        return format_html('<a href="{}">{}</a>', url, obj.conversation_id)

    @admin.action(description="Cancel selected jobs")
    def cancel_selected(self, request, queryset):
        outcomes: dict[str, int] = {}
        for job in queryset:
            try:
                status = services.job_cancel(job)
            except ApiError:
                status = "not cancellable"
            outcomes[status] = outcomes.get(status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in sorted(outcomes.items()))
        self.message_user(request, f"Cancel requested: {summary}.")


@admin.register(Step)
class StepAdmin(HistoryAdmin):
    list_display = ("job", "index", "kind", "name", "status", "elapsed", "started_at")
    list_filter = ("kind", "status")
    search_fields = ("job__id", "name")
    list_select_related = ("job",)
