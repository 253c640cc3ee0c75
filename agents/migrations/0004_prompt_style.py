from django.db import migrations, models

# The 0003 default profile's values: a profile that still has them was never edited.
OLD_OPTIONS = {"temperature": 0.7, "num_predict": 200, "stop": ["\nUser:", "\nuser:", "\nTask:"]}
OLD_SYSTEM_PROMPT = (
    "The following is a conversation between a user and a helpful, concise assistant. "
    "The assistant answers the user's last message."
)

# The embedded Gemma 3 270M is a base model: a plain transcript it continues, greedy
# decoding (sampling at 0.7 turns its answers into noise) and stops at the end of its turn.
DEFAULT_OPTIONS = {
    "temperature": 0.0,
    "num_predict": 96,
    "stop": ["\nUser:", "\nuser:", "\nAssistant:", "\n\n"],
}
DEFAULT_SYSTEM_PROMPT = OLD_SYSTEM_PROMPT


def update_default_profile(apps, schema_editor):
    """The default profile for the embedded base model, unless someone changed it."""
    AgentProfile = apps.get_model("agents", "AgentProfile")
    AgentProfile.objects.filter(
        name="default", options=OLD_OPTIONS, system_prompt=OLD_SYSTEM_PROMPT
    ).update(
        prompt_style="transcript", options=DEFAULT_OPTIONS, system_prompt=DEFAULT_SYSTEM_PROMPT
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_default_profile_and_reaper"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentprofile",
            name="prompt_style",
            field=models.CharField(
                choices=[
                    ("transcript", "Transcript (base models that continue text)"),
                    ("chat", "Chat messages (instruction-tuned models)"),
                ],
                default="transcript",
                help_text="Transcript for base models, chat messages for instruction-tuned ones.",
                max_length=12,
            ),
        ),
        migrations.AddConstraint(
            model_name="agentprofile",
            constraint=models.CheckConstraint(
                condition=models.Q(("prompt_style__in", ["transcript", "chat"])),
                name="profile_prompt_style_valid",
            ),
        ),
        migrations.RunPython(update_default_profile, migrations.RunPython.noop),
    ]
