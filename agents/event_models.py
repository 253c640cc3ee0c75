"""The events of a job (``GET /agent/job/{id}/events``): written once, in the transaction of
the change they tell of, kept as long as the job."""

from django.db import models
from django.db.models import Q
from django.utils import timezone


class JobEventType(models.TextChoices):
    STATUS = "status"
    STEP = "step"
    TOKEN = "token"


class JobEvent(models.Model):
    """One event of a job. ``seq`` is its id in the stream (the SSE ``id:``): 1, 2, 3, ...
    within the job, in the order the events were committed."""

    job = models.ForeignKey("agents.Job", on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=8, choices=JobEventType.choices)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("job", "seq")
        constraints = [
            models.UniqueConstraint(fields=("job", "seq"), name="unique_event_seq_per_job"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="event_seq_positive"),
            models.CheckConstraint(
                condition=Q(type__in=JobEventType.values), name="event_type_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} #{self.seq} {self.type}"
