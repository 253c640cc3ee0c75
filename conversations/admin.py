from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.text import Truncator

from agents.models import Job
from conversations import events, vectors
from conversations import transcript as transcripts
from conversations.event_views import staff_stream
from conversations.models import Conversation, EmbeddingCatchUp, Message
from core.admin import HistoryAdmin, status_badge

JOBS_SHOWN = 20


def _changelist(model: str, **filters: str) -> str:
    return f"{reverse(f'admin:{model}_changelist')}?{urlencode(filters)}"


@admin.register(Conversation)
class ConversationAdmin(HistoryAdmin):
    """Read-only: conversations are written by chats. The transcript shows the newest
    messages; the message list (linked) has all of them, searchable."""

    list_display = ("id", "owner", "scope", "profile", "message_count", "updated_at")
    list_filter = ("source", "scope_type", "profile", "updated_at")
    search_fields = ("id", "scope_id", "source", "owner__username")
    list_select_related = ("owner", "profile")
    date_hierarchy = "updated_at"
    show_full_result_count = False
    fields = (
        "id",
        "owner",
        "source",
        "scope_type",
        "scope_id",
        "profile",
        "message_count",
        "last_seq",
        "summary",
        "summary_until_seq",
        "summary_tokens",
        "created_at",
        "updated_at",
        "jobs",
        "transcript",
    )
    readonly_fields = fields

    @admin.display(description="source / scope")
    def scope(self, obj: Conversation) -> str:
        return Truncator(f"{obj.source}/{obj.scope_type}/{obj.scope_id}").chars(50)

    @admin.display(description="jobs")
    def jobs(self, obj: Conversation) -> str:
        jobs = list(
            Job.objects.filter(conversation=obj)
            .order_by("-created_at")
            .values_list("pk", "kind", "status", "created_at")[:JOBS_SHOWN]
        )
        if not jobs:
            return "-"
        rows = format_html_join(
            "",
            '<li><a href="{}">{}</a> {} {} {}</li>',
            (
                (
                    reverse("admin:agents_job_change", args=[pk]),
                    pk,
                    kind,
                    status_badge(status),
                    f"{created:%Y-%m-%d %H:%M:%S}",
                )
                for pk, kind, status, created in jobs
            ),
        )
        every = _changelist("agents_job", conversation=obj.pk)
        return format_html('<ul>{}</ul><a href="{}">All jobs of this conversation</a>', rows, every)

    class Media:
        js = ("backoffice/live.js",)

    def get_urls(self):
        stream = self.admin_site.admin_view(self.events_view)
        return [
            path("<path:object_id>/events/", stream, name="conversations_conversation_events"),
            *super().get_urls(),
        ]

    def events_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The conversation's event stream under the staff session, for the live transcript
        (the API's stream takes keys, which a browser page does not hold)."""
        conversation = get_object_or_404(Conversation, pk=unquote(object_id))
        if not self.has_view_permission(request, conversation):
            raise PermissionDenied
        return staff_stream(request, conversation.pk)

    @admin.display(description="transcript")
    def transcript(self, obj: Conversation) -> str:
        every = _changelist("conversations_message", conversation__id__exact=obj.pk)
        # Read before the messages: one stored in between is then both shown and sent (the
        # page shows it once), never neither.
        last_event_id = events.last_seq(obj.pk)
        context = {
            **transcripts.transcript(obj),
            "message_list_url": every,
            "events_url": reverse("admin:conversations_conversation_events", args=[quote(obj.pk)]),
            "last_event_id": last_event_id,
        }
        return render_to_string("admin/conversations/conversation/transcript.html", context)


@admin.register(Message)
class MessageAdmin(HistoryAdmin):
    list_display = ("conversation", "seq", "role", "excerpt", "token_estimate", "job", "created_at")
    list_filter = ("role", "created_at")
    search_fields = ("content", "conversation__id")
    list_select_related = ("conversation", "job")
    show_full_result_count = False
    fields = ("conversation", "seq", "role", "content", "token_estimate", "job", "created_at")
    readonly_fields = fields
    ordering = ("-id",)

    @admin.display(description="content")
    def excerpt(self, obj: Message) -> str:
        return Truncator(obj.content).chars(80)


@admin.register(EmbeddingCatchUp)
class EmbeddingCatchUpAdmin(HistoryAdmin):
    """Read-only: how far the embedding catch-up got, per model, and (on a model's page:
    two counts, not one per row of a list) how fast it goes."""

    list_display = ("model", "below_id")
    fields = ("model", "below_id", "per_minute", "waiting")
    readonly_fields = fields

    @admin.display(description="vectors stored per minute (last 10 minutes)")
    def per_minute(self, obj: EmbeddingCatchUp) -> float:
        return vectors.catch_up_progress(obj.model)["per_minute"]

    @admin.display(description="messages waiting for a vector")
    def waiting(self, obj: EmbeddingCatchUp) -> int:
        return vectors.catch_up_progress(obj.model)["waiting"]
