import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0012_job_events"),
        ("conversations", "0005_embedding_catch_up"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConversationEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.PositiveIntegerField()),
                (
                    "type",
                    models.CharField(
                        choices=[("message", "Message"), ("token", "Token")], max_length=8
                    ),
                ),
                ("data", models.JSONField(default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "conversation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="conversations.conversation",
                    ),
                ),
                (
                    "job",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="agents.job",
                    ),
                ),
                (
                    "message",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="conversations.message",
                    ),
                ),
            ],
            options={
                "ordering": ("conversation_id", "seq"),
                "constraints": [
                    models.UniqueConstraint(
                        fields=("conversation", "seq"), name="unique_event_seq_per_conversation"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("seq__gte", 1)), name="conversation_event_seq_positive"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("type__in", ["message", "token"])),
                        name="conversation_event_type_valid",
                    ),
                ],
            },
        ),
    ]
