"""``manage.py check_runtime``: the configured runtimes, their models, whether they answer."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gateway.models import ModelRoute, RuntimeEndpoint, UsageRecord

pytestmark = pytest.mark.django_db


def check_runtime(*args: str) -> str:
    out = StringIO()
    call_command("check_runtime", *args, stdout=out)
    return out.getvalue()


def route(model: str, url: str, *, name: str = "fleet-1", api: str = "ollama") -> RuntimeEndpoint:
    endpoint, _ = RuntimeEndpoint.objects.get_or_create(
        name=name, defaults={"base_url": url, "api": api}
    )
    ModelRoute.objects.create(model=model, endpoint=endpoint)
    return endpoint


def test_it_lists_the_default_runtime_with_the_models_it_serves(runtime, settings):
    out = check_runtime()
    assert f"default (MODEL_RUNTIME_URL): {runtime.url} [ollama]" in out
    assert "answers in" in out
    assert "serves: " in out and settings.AGENT_MODEL in out
    assert "is not listed" not in out
    assert "All 1 runtime(s) answer." in out


def test_it_lists_routed_endpoints_and_their_models(runtime):
    route("test-model", runtime.url, name="fleet-1")
    out = check_runtime()
    assert f"fleet-1: {runtime.url} [ollama]" in out
    assert "routed: test-model" in out


def test_it_exits_non_zero_when_a_runtime_does_not_answer(runtime, unused_port):
    route("big-model", f"http://127.0.0.1:{unused_port}", name="gpu-1")
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("check_runtime", stdout=out)
    assert caught.value.returncode == 1
    text = out.getvalue()
    assert "gpu-1" in text and "DOES NOT ANSWER: runtime_unavailable" in text
    # The default runtime was still checked, and answers.
    assert "answers in" in text


def test_it_exits_non_zero_when_the_default_runtime_is_down(runtime, settings, unused_port):
    settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{unused_port}"
    with pytest.raises(CommandError):
        check_runtime()


def test_it_warns_when_a_routed_model_is_not_listed_by_its_runtime(runtime):
    route("no-such-model", runtime.url)
    out = check_runtime()
    assert "no-such-model is not listed there" in out


def test_it_accepts_ollamas_latest_tag_for_a_bare_model_name(runtime):
    runtime.models = {"phi3:latest"}
    route("phi3", runtime.url)
    assert "is not listed" not in check_runtime()


def test_generate_times_a_tiny_generation_without_a_usage_record(runtime, settings):
    runtime.script = lambda prompt, body: " Paris."
    out = check_runtime("--generate")
    assert f"{settings.AGENT_MODEL}: " in out
    assert "'Paris.'" in out
    [request] = runtime.generate_requests()
    assert request.body["prompt"] == "Q: What is the capital of France?\nA:"
    assert not UsageRecord.objects.exists()


def test_generate_exits_non_zero_when_a_generation_fails(runtime):
    from tests.runtime_server import Reply

    runtime.script = lambda prompt, body: Reply(status=500, error="model crashed")
    with pytest.raises(CommandError):
        check_runtime("--generate")


def test_it_leaves_the_read_timeout_setting_as_it_was(runtime, settings):
    before = settings.RUNTIME_READ_TIMEOUT
    check_runtime("--timeout", "1")
    assert before == settings.RUNTIME_READ_TIMEOUT
