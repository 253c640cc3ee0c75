"""The webhooks' tables: each owner's signing secret, each event to deliver, each attempt."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class WebhookSecret(models.Model):
    """An owner's Standard Webhooks secret (``whsec_`` + base64). After a rotation the
    previous one signs too, until ``rotated_at`` + 24 h."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    secret = models.CharField(max_length=100)
    previous_secret = models.CharField(max_length=100, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"webhook secret of {self.owner_id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookDelivery(models.Model):
    """One event of a job to POST to its webhook; ``id`` is the event's ``webhook-id``, the
    same on every attempt. ``body`` is the JSON sent, as sent."""

    id = models.CharField(primary_key=True, max_length=40)
    job = models.ForeignKey("agents.Job", on_delete=models.CASCADE, related_name="deliveries")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=20, help_text="job.running, job.step, job.finished, ...")
    url = models.CharField(max_length=2000)
    body = models.TextField()
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="An attempt in flight until then."
    )
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=("status", "next_attempt_at"), name="webhook_delivery_due"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=DeliveryStatus.values), name="webhook_delivery_status_valid"
            ),
            # A pending delivery has its next attempt's time; an ended one has none.
            models.CheckConstraint(
                condition=Q(status=DeliveryStatus.PENDING, next_attempt_at__isnull=False)
                | (~Q(status=DeliveryStatus.PENDING) & Q(next_attempt_at__isnull=True)),
                name="webhook_delivery_pending_has_next",
            ),
        ]

    def __str__(self) -> str:
        return self.id


class WebhookAttempt(models.Model):
    """One POST of a delivery: when, what came back (at most 1 KiB of it), how long it took.
    Written when the attempt starts; one the worker did not finish keeps its first error."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="tries")
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency = models.FloatField(null=True, blank=True, help_text="Seconds.")
    error = models.CharField(max_length=500, blank=True)
    response = models.TextField(blank=True, help_text="The first KiB of the answer.")

    class Meta:
        ordering = ("delivery", "number")
        constraints = [
            models.UniqueConstraint(fields=("delivery", "number"), name="one_attempt_per_number")
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}"
