from django.urls import path

from agents.event_views import JobEventsView
from agents.views import (
    JobCancelView,
    JobDetailView,
    JobStartView,
    WebhookSecretRotateView,
    WebhookSecretView,
)

urlpatterns = [
    path("job/start", JobStartView.as_view(), name="job-start"),
    path("job/<str:job_id>", JobDetailView.as_view(), name="job-detail"),
    path("job/<str:job_id>/cancel", JobCancelView.as_view(), name="job-cancel"),
    path("job/<str:job_id>/events", JobEventsView.as_view(), name="job-events"),
    path("webhooks/secret", WebhookSecretView.as_view(), name="webhook-secret"),
    path("webhooks/secret/rotate", WebhookSecretRotateView.as_view(), name="webhook-rotate"),
]
