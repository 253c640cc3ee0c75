"""agents/migrations/0014: a default profile made for an instruction-tuned embedded model
gets chat prompts; one made for the base model, or edited by someone, keeps its own."""

import importlib

import pytest
from django.apps import apps

from agents.models import AgentProfile
from tests.factories import default_profile

CHAT = importlib.import_module("agents.migrations.0014_default_profile_for_chat_models")
EXAMPLE = importlib.import_module("agents.migrations.0005_default_prompt_example")
TASK = importlib.import_module("agents.migrations.0007_profile_task_prompt")

pytestmark = pytest.mark.django_db


def as_first_migrated(model: str, **edits: str) -> AgentProfile:
    """The default profile as 0003-0013 leave it for AGENT_MODEL ``model``."""
    profile = default_profile()
    fields = {
        "model": model,
        "prompt_style": "transcript",
        "system_prompt": EXAMPLE.DEFAULT_SYSTEM_PROMPT,
        "task_prompt": TASK.DEFAULT_TASK_PROMPT,
    }
    AgentProfile.objects.filter(pk=profile.pk).update(**{**fields, **edits})
    return profile


@pytest.mark.parametrize("model", ["qwen2.5-coder:1.5b", "smollm2:135m"])
def test_an_instruction_tuned_model_gets_chat_prompts_and_the_way_back_restores_them(model):
    profile = as_first_migrated(model)
    CHAT.to_chat(apps, None)
    profile.refresh_from_db()
    assert (profile.prompt_style, profile.system_prompt, profile.task_prompt) == (
        "chat",
        CHAT.CHAT_SYSTEM_PROMPT,
        CHAT.CHAT_TASK_PROMPT,
    )
    assert "don't know" in profile.system_prompt and "Example" not in profile.system_prompt
    CHAT.to_transcript(apps, None)
    profile.refresh_from_db()
    assert (profile.prompt_style, profile.system_prompt, profile.task_prompt) == (
        "transcript",
        EXAMPLE.DEFAULT_SYSTEM_PROMPT,
        TASK.DEFAULT_TASK_PROMPT,
    )


@pytest.mark.parametrize(
    "model, edits",
    [
        ("gemma3:270m", {}),  # the base model keeps its transcript and example
        ("llama3.2:3b", {}),  # a model make run does not serve: its owner chooses
        ("qwen2.5-coder:1.5b", {"system_prompt": "Answer in French."}),  # edited
        ("qwen2.5-coder:1.5b", {"task_prompt": "Write tersely."}),  # edited
    ],
)
def test_the_base_model_and_an_edited_profile_keep_their_prompts(model, edits):
    profile = as_first_migrated(model, **edits)
    before = AgentProfile.objects.values().get(pk=profile.pk)
    CHAT.to_chat(apps, None)
    assert AgentProfile.objects.values().get(pk=profile.pk) == before


def test_every_instruction_tuned_packaged_model_is_known_to_the_migration():
    from scripts import embedded_runtime

    chat_tuned = {m.alias for m in embedded_runtime.MODELS.values() if not m.transcript_chat}
    assert chat_tuned == set(CHAT.CHAT_MODELS)
