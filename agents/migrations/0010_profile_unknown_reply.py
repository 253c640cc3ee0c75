from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0009_webhooks"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentprofile",
            name="unknown_reply",
            field=models.CharField(
                blank=True,
                default="I don't know.",
                help_text="A chat's reply when the model's answers, asked again, kept borrowing from the prompt (its example's facts, the previous reply, a value the user never gave); left blank, \"I don't know.\"",
                max_length=200,
            ),
        ),
    ]
