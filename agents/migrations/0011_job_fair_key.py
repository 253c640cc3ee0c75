"""Fair claiming across owners: each job's place in the fair order (agents.fairness). Jobs
already queued get 0 and are claimed oldest first, as before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agents", "0010_profile_unknown_reply")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="fair_key",
            field=models.BigIntegerField(default=0, editable=False),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["status", "fair_key", "created_at"], name="job_status_fair"),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                fields=["owner", "status", "fair_key"], name="job_owner_status_fair"
            ),
        ),
    ]
