from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="summary_tokens",
            field=models.PositiveIntegerField(
                default=0, help_text="Token count of the summary, counted when it was stored."
            ),
        ),
        # Ordering by "conversation" joined the conversation table to sort by its ordering.
        migrations.AlterModelOptions(
            name="message",
            options={"ordering": ("conversation_id", "seq")},
        ),
    ]
