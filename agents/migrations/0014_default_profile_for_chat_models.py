"""A default profile created for an instruction-tuned embedded model gets chat prompts.

The default profile takes its model from AGENT_MODEL when the database is first migrated
(``make run`` sets it to the embedded model's name), and 0004-0007 then give it the base
model's transcript prompts: an example conversation to continue and a task written as a
document. An instruction-tuned model reads chat messages and follows an instruction
instead (``bench/chat_quality.py --prompt-style chat``). A default profile still as those
migrations left it, whose model is an instruction-tuned model that ``make run`` can serve,
is switched to the chat style with such an instruction; a profile someone edited is left
alone.
"""

import importlib

from django.db import migrations

EXAMPLE = importlib.import_module("agents.migrations.0005_default_prompt_example")
TASK = importlib.import_module("agents.migrations.0007_profile_task_prompt")

# The names scripts/embedded_runtime.MODELS serves its instruction-tuned models under.
CHAT_MODELS = ("qwen2.5-coder:1.5b", "smollm2:135m")

CHAT_SYSTEM_PROMPT = (
    "You are a helpful, concise assistant. Answer the user's last message in one short "
    "sentence, using only what the user told you in this conversation. If the user never "
    "told you, say that you don't know."
)
CHAT_TASK_PROMPT = (
    "You are a helpful, concise assistant. Do exactly what the task asks: write the text "
    "asked for, or answer the question in one or two sentences."
)


def to_chat(apps, schema_editor):
    AgentProfile = apps.get_model("agents", "AgentProfile")
    AgentProfile.objects.filter(
        name="default",
        model__in=CHAT_MODELS,
        prompt_style="transcript",
        system_prompt=EXAMPLE.DEFAULT_SYSTEM_PROMPT,
        task_prompt=TASK.DEFAULT_TASK_PROMPT,
    ).update(prompt_style="chat", system_prompt=CHAT_SYSTEM_PROMPT, task_prompt=CHAT_TASK_PROMPT)


def to_transcript(apps, schema_editor):
    AgentProfile = apps.get_model("agents", "AgentProfile")
    AgentProfile.objects.filter(
        name="default",
        prompt_style="chat",
        system_prompt=CHAT_SYSTEM_PROMPT,
        task_prompt=CHAT_TASK_PROMPT,
    ).update(
        prompt_style="transcript",
        system_prompt=EXAMPLE.DEFAULT_SYSTEM_PROMPT,
        task_prompt=TASK.DEFAULT_TASK_PROMPT,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0013_profile_acknowledgement_reply"),
    ]

    operations = [
        migrations.RunPython(to_chat, to_transcript),
    ]
