from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import (
    HttpRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.text import Truncator

from agents import live_admin, services
from agents.models import AgentProfile, IdempotencyKey, Job, JobStatus, Step
from agents.prompt_view import prompt_views
from agents.webhook_admin import WebhookDeliveryInline
from core.admin import HistoryAdmin, ServiceAdmin, format_seconds, seconds_between, status_badge
from core.exceptions import JobNotCancellable

# A job's page shows at most this many steps (a profile's max_steps keeps jobs far below).
STEPS_SHOWN = 100
CANCELLABLE = (JobStatus.QUEUED, JobStatus.RUNNING)


@admin.register(AgentProfile)
class AgentProfileAdmin(ServiceAdmin):
    list_display = (
        "name",
        "model",
        "prompt_style",
        "context_window",
        "answer_reserve",
        "max_steps",
        "updated_at",
    )
    list_filter = ("prompt_style",)
    search_fields = ("name", "model", "description")


@admin.register(Job)
class JobAdmin(HistoryAdmin):
    """Jobs are read, never edited: the page has no Save; Cancel is a service call."""

    list_display = (
        "short_id",
        "kind",
        "status_colour",
        "model_name",
        "key",
        "scope",
        "step_count",
        "duration",
        "created_at",
    )
    list_filter = ("status", "kind", "source", "scope_type", "created_at")
    search_fields = ("id", "scope_id")
    list_display_links = ("short_id",)
    list_select_related = ("profile", "api_key")
    date_hierarchy = "created_at"
    change_form_template = "admin/agents/job/change_form.html"
    fieldsets = (
        (None, {"fields": ("id", "status_colour", "kind", "owner", "key_link", "profile")}),
        (
            "Work",
            {
                "fields": (
                    "source",
                    "scope_type",
                    "scope_id",
                    "conversation_link",
                    "task",
                    "webhook",
                    "webhook_events",
                )
            },
        ),
        ("Outcome", {"fields": ("final_result_readable", "error", "duration")}),
        ("Steps", {"fields": ("timeline",)}),
        (
            "Times and worker",
            {
                "classes": ("collapse",),
                "fields": (
                    "created_at",
                    "enqueued_at",
                    "started_at",
                    "finished_at",
                    "cancel_requested_at",
                    "attempts",
                    "lease_owner",
                    "lease_expires_at",
                    "heartbeat_at",
                ),
            },
        ),
    )
    readonly_fields = tuple(name for _, opts in fieldsets for name in opts["fields"])
    actions = ("cancel_selected",)
    inlines = (WebhookDeliveryInline,)

    def has_cancel_permission(self, request, obj=None) -> bool:
        """Cancelling changes a job's status: staff who may change jobs."""
        return request.user.has_perm("agents.change_job")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(steps_count=Count("steps"))

    def get_urls(self):
        cancel = self.admin_site.admin_view(self.cancel_view)
        stream = self.admin_site.admin_view(self.events_view)
        return [
            path("<path:object_id>/cancel/", cancel, name="agents_job_cancel"),
            path("<path:object_id>/events/", stream, name="agents_job_events"),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, *args, obj=None, **kwargs):
        context["cancellable"] = (
            obj is not None and obj.status in CANCELLABLE and self.has_cancel_permission(request)
        )
        return super().render_change_form(request, context, *args, obj=obj, **kwargs)

    def cancel_view(self, request: HttpRequest, object_id: str):
        """The Cancel button: the same service as ``POST /agent/job/{id}/cancel``."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        job = get_object_or_404(Job, pk=unquote(object_id))
        if not self.has_cancel_permission(request, job):
            raise PermissionDenied
        try:
            status = services.job_cancel(job)
        except JobNotCancellable as err:
            self.message_user(request, err.message, level="error")
        else:
            self.message_user(request, f"Job {job.pk} is {status}.")
        return HttpResponseRedirect(reverse("admin:agents_job_change", args=[quote(job.pk)]))

    def events_view(self, request: HttpRequest, object_id: str) -> StreamingHttpResponse:
        """The job's event stream under the staff session, for its live page."""
        job = get_object_or_404(Job, pk=unquote(object_id))
        if not self.has_view_permission(request, job):
            raise PermissionDenied
        return live_admin.job_stream(request, job)

    @admin.display(description="status", ordering="status")
    def status_colour(self, obj: Job) -> str:
        return status_badge(obj.status)

    @admin.display(description="job", ordering="id")
    def short_id(self, obj: Job) -> str:
        """The id's end, which tells jobs apart (a ULID's start is its time, shown beside
        it); the whole id in the title and on the job's page. The list fits 1,280 px."""
        return format_html('<span title="{}">…{}</span>', obj.pk, obj.pk[-10:])

    @admin.display(description="model", ordering="profile__model")
    def model_name(self, obj: Job) -> str:
        return obj.profile.model

    @admin.display(description="key", ordering="api_key__name")
    def key(self, obj: Job) -> str:
        return obj.api_key.name

    @admin.display(description="source / scope")
    def scope(self, obj: Job) -> str:
        return Truncator(f"{obj.source}/{obj.scope_type}/{obj.scope_id}").chars(30)

    @admin.display(description="steps", ordering="steps_count")
    def step_count(self, obj: Job) -> int | str:
        return getattr(obj, "steps_count", "-")

    @admin.display(description="duration")
    def duration(self, obj: Job) -> str:
        return format_seconds(seconds_between(obj.started_at, obj.finished_at))

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

    @admin.display(description="final result")
    def final_result_readable(self, obj: Job) -> str:
        return render_to_string("admin/agents/step/readable.html", {"value": obj.final_result})

    @admin.display(description="timeline")
    def timeline(self, obj: Job) -> str:
        # Read before the steps: an event written in between is then both shown and sent
        # (the page shows a step once), never neither.
        last_event_id = live_admin.last_seq(obj)
        steps = list(obj.steps.order_by("index")[: STEPS_SHOWN + 1])
        all_steps = reverse("admin:agents_step_changelist") + "?" + urlencode({"job": obj.pk})
        views = prompt_views(obj, steps[:STEPS_SHOWN])
        return render_to_string(
            "admin/agents/job/timeline.html",
            {
                "job": obj,
                "steps": [(step, views.get(step.index)) for step in steps[:STEPS_SHOWN]],
                "more": len(steps) > STEPS_SHOWN,
                "total": obj.steps.count() if len(steps) > STEPS_SHOWN else len(steps),
                "all_steps_url": all_steps,
                # A job still going is followed live (live.js); an ended one is all here.
                "events_url": ""
                if obj.is_terminal
                else reverse("admin:agents_job_events", args=[quote(obj.pk)]),
                "last_event_id": last_event_id,
            },
        )

    @admin.action(description="Cancel selected jobs", permissions=["cancel"])
    def cancel_selected(self, request, queryset):
        outcomes: dict[str, int] = {}
        for job in queryset:
            try:
                status = services.job_cancel(job)
            except JobNotCancellable:
                status = "not cancellable"
            outcomes[status] = outcomes.get(status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in sorted(outcomes.items()))
        self.message_user(request, f"Cancel requested: {summary}.")


@admin.register(Step)
class StepAdmin(HistoryAdmin):
    list_display = ("job", "index", "kind", "name", "status_colour", "elapsed", "started_at")
    list_filter = ("kind", "status")
    search_fields = ("job__id", "name")
    list_select_related = ("job",)
    fields = (
        "job_link",
        "index",
        "kind",
        "name",
        "status_colour",
        "started_at",
        "finished_at",
        "elapsed",
        "input_readable",
        "output_readable",
    )
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_colour(self, obj: Step) -> str:
        return status_badge(obj.status)

    @admin.display(description="job")
    def job_link(self, obj: Step) -> str:
        url = reverse("admin:agents_job_change", args=[obj.job_id])
        return format_html('<a href="{}#step-{}">{}</a>', url, obj.index, obj.job_id)

    @admin.display(description="input")
    def input_readable(self, obj: Step) -> str:
        return render_to_string("admin/agents/step/readable.html", {"value": obj.input})

    @admin.display(description="output")
    def output_readable(self, obj: Step) -> str:
        return render_to_string("admin/agents/step/readable.html", {"value": obj.output})


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(HistoryAdmin):
    """The stored answers of requests made with an Idempotency-Key: read only."""

    list_display = ("key", "owner", "method", "path", "status_code", "job_id", "created_at")
    list_filter = ("method", "status_code", "created_at")
    search_fields = ("key", "job_id", "owner__username")
    list_select_related = ("owner",)
    fields = (
        "key",
        "owner",
        "method",
        "path",
        "fingerprint",
        "status_code",
        "body",
        "headers",
        "job_id",
        "created_at",
        "expires_at",
    )
    readonly_fields = fields
