from django.db import migrations, models

# Task jobs of the default profile used its system prompt, which ends with an example
# conversation about a friend called Tom and a bike in the shed: a base model copied it
# into answers to tasks. A task prompt of its own says what a task is, and nothing else.
DEFAULT_TASK_PROMPT = (
    "Below is a task and a helpful, concise assistant's answer to it. The assistant does "
    "exactly what the task asks: it writes the text asked for, or answers the question in "
    "one or two sentences."
)


def set_task_prompt(apps, schema_editor):
    AgentProfile = apps.get_model("agents", "AgentProfile")
    AgentProfile.objects.filter(name="default", prompt_style="transcript", task_prompt="").update(
        task_prompt=DEFAULT_TASK_PROMPT
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_job_request_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentprofile",
            name="task_prompt",
            field=models.TextField(
                blank=True,
                help_text="What task jobs' prompts start with (the system prompt when blank): the system prompt of chats may carry an example conversation that a task has no use for.",
            ),
        ),
        migrations.RunPython(set_task_prompt, migrations.RunPython.noop),
    ]
