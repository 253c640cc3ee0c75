"""The webhooks in the admin: every delivery with its attempts, on its own list and on its
job's page, and a "send again" action. Rows are written by the service only."""

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agents import webhooks
from agents.webhook_models import WebhookAttempt, WebhookDelivery
from core.admin import HistoryAdmin


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class WebhookAttemptInline(ReadOnlyInline):
    model = WebhookAttempt
    fields = ("number", "started_at", "status_code", "latency", "error", "response")
    readonly_fields = fields
    show_change_link = False


class WebhookDeliveryInline(ReadOnlyInline):
    """On a job's page: its webhook deliveries."""

    model = WebhookDelivery
    fields = ("id", "event", "status", "attempts", "created_at", "delivered_at")
    readonly_fields = fields


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(HistoryAdmin):
    list_display = ("id", "event", "status", "attempts", "job_link", "url", "created_at")
    list_filter = ("status", "event", "created_at")
    search_fields = ("id", "job__id", "url")
    list_select_related = ("job",)
    date_hierarchy = "created_at"
    fields = (
        "id",
        "job_link",
        "event",
        "url",
        "status",
        "attempts",
        "created_at",
        "next_attempt_at",
        "delivered_at",
        "body",
    )
    readonly_fields = fields
    inlines = (WebhookAttemptInline,)
    actions = ("send_again",)

    @admin.display(description="job")
    def job_link(self, obj: WebhookDelivery) -> str:
        url = reverse("admin:agents_job_change", args=[obj.job_id])
        return format_html('<a href="{}">{}</a>', url, obj.job_id)

    @admin.action(description="Send again")
    def send_again(self, request: HttpRequest, queryset) -> None:
        count = 0
        for delivery in queryset:
            webhooks.webhook_send_again(delivery)
            count += 1
        self.message_user(request, f"{count} deliveries will be sent again.")
