from django.db import migrations

# The 0004 default profile's system prompt: a profile that still has it was never edited.
OLD_SYSTEM_PROMPT = (
    "The following is a conversation between a user and a helpful, concise assistant. "
    "The assistant answers the user's last message."
)

# The embedded Gemma 3 270M is a base model: it follows an example better than an
# instruction. A short example conversation in which the assistant answers from what the
# user said earlier, after a line of small talk, raised its right answers to questions
# about a fact told a few turns earlier from 41/60 to 47/60 in a trial outside the service
# (greedy decoding, pairs that are not the bench's). It costs about 100 tokens of every
# prompt, and the model now and then copies it ("My friend is called Tom.").
DEFAULT_SYSTEM_PROMPT = (
    "The following is a conversation between a user and a helpful, concise assistant. "
    "The assistant remembers what the user told it and answers the user's last message "
    "in one short sentence.\n"
    "\n"
    "Example:\n"
    "User: My friend is called Tom.\n"
    "Assistant: Nice to hear about Tom.\n"
    "User: I keep my bike in the shed.\n"
    "Assistant: Good to know.\n"
    "User: It was sunny today, we went for a long walk.\n"
    "Assistant: That sounds lovely.\n"
    "User: What is my friend called?\n"
    "Assistant: Your friend is called Tom.\n"
    "User: Where do I keep my bike?\n"
    "Assistant: You keep your bike in the shed."
)


def set_prompt(old: str, new: str):
    def update(apps, schema_editor):
        AgentProfile = apps.get_model("agents", "AgentProfile")
        AgentProfile.objects.filter(
            name="default", prompt_style="transcript", system_prompt=old
        ).update(system_prompt=new)

    return update


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_prompt_style"),
    ]

    operations = [
        migrations.RunPython(
            set_prompt(OLD_SYSTEM_PROMPT, DEFAULT_SYSTEM_PROMPT),
            set_prompt(DEFAULT_SYSTEM_PROMPT, OLD_SYSTEM_PROMPT),
        ),
    ]
