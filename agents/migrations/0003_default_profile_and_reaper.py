from django.conf import settings
from django.db import migrations

# The embedded model is a base model: a plain transcript with a stop sequence works far
# better with it than a chat template.
DEFAULT_SYSTEM_PROMPT = (
    "The following is a conversation between a user and a helpful, concise assistant. "
    "The assistant answers the user's last message."
)


def create_default_profile(apps, schema_editor):
    AgentProfile = apps.get_model("agents", "AgentProfile")
    AgentProfile.objects.get_or_create(
        name="default",
        defaults={
            "description": "The profile used when a request names none.",
            "model": settings.AGENT_MODEL,
            "options": {
                "temperature": 0.7,
                "num_predict": 200,
                "stop": ["\nUser:", "\nuser:", "\nTask:"],
            },
            "system_prompt": DEFAULT_SYSTEM_PROMPT,
            "context_window": 2048,
            "answer_reserve": 256,
            "max_steps": 4,
            "tools": ["search_history", "read_history", "calculator"],
        },
    )


def schedule_reaper(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="reap_jobs",
        defaults={
            "func": "agents.tasks.reap_jobs",
            "schedule_type": "I",
            "minutes": 1,
            "repeats": -1,
        },
    )


def unschedule_reaper(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="reap_jobs").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_initial"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [
        migrations.RunPython(create_default_profile, migrations.RunPython.noop),
        migrations.RunPython(schedule_reaper, unschedule_reaper),
    ]
