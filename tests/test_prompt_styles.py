"""Prompts shaped for the model: a transcript without tools for a base model, chat
messages for an instruction-tuned one, against the loopback runtime in both protocols."""

import json

import pytest
from django.conf import settings

from agents import tasks
from agents.models import AgentProfile, Job, JobStatus, Step
from conversations.models import Message
from tests.factories import make_job
from tests.runtime_server import Reply

pytestmark = pytest.mark.django_db

SCOPE = {"source": "web", "scope_type": "ticket", "scope_id": 7}


@pytest.fixture
def chat(agent_client, sync_queue, django_capture_on_commit_callbacks):
    """Posts a chat and runs its job inline; returns the finished job."""

    def post(prompt: str, **fields) -> Job:
        with django_capture_on_commit_callbacks(execute=True):
            response = agent_client.post(
                "/agent/chat", {**SCOPE, "prompt": prompt, **fields}, format="json"
            )
        assert response.status_code == 200, response.json()
        return Job.objects.get(pk=response.json()["data"]["job_id"])

    return post


def chat_profile(**fields) -> AgentProfile:
    values = {
        "name": "instruct",
        "model": settings.AGENT_MODEL,
        "prompt_style": "chat",
        "system_prompt": "You are a helpful assistant.",
        "tools": ["search_history", "read_history", "calculator"],
        "options": {"temperature": 0.2},
    }
    return AgentProfile.objects.create(**{**values, **fields})


def use_api(settings, runtime, api: str) -> None:
    settings.MODEL_RUNTIME_API = api
    from gateway import routing

    routing.clear_cache()


def reply(job: Job) -> str:
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED, job.error
    return job.final_result["message"]["content"]


# --- A base model: a transcript without tools ---------------------------------------------


def test_the_default_profile_is_a_greedy_transcript_for_the_embedded_base_model():
    default = AgentProfile.objects.get(name="default")
    assert default.prompt_style == "transcript"
    assert default.options["temperature"] == 0
    assert "\nUser:" in default.options["stop"]


def test_the_default_profile_shows_the_base_model_an_answer_from_an_earlier_message():
    system_prompt = AgentProfile.objects.get(name="default").system_prompt
    example = system_prompt.split("Example:\n", 1)[1].splitlines()
    assert example[0] == "User: My friend is called Tom."
    assert "Assistant: Your friend is called Tom." in example[2:]


def test_a_base_model_profiles_prompt_has_no_tool_list(chat, runtime):
    runtime.script = lambda prompt, body: "Hello Ada."
    job = chat("My name is Ada.")
    assert reply(job) == "Hello Ada."
    [request] = runtime.generate_requests()
    assert request.path == "/api/generate"
    prompt = request.body["prompt"]
    assert prompt.endswith("User: My name is Ada.\nAssistant:")
    for tool in ("search_history", "read_history", "calculator", '"tool"', "Arguments"):
        assert tool not in prompt
    assert "\nUser:" in request.body["options"]["stop"]
    assert "\nAssistant:" in request.body["options"]["stop"]


def test_a_transcript_profile_without_its_own_stops_gets_the_turn_stops(chat, runtime):
    AgentProfile.objects.create(name="bare", model=settings.AGENT_MODEL, options={})
    runtime.script = lambda prompt, body: "Hi."
    chat("Hello", profile="bare")
    [request] = runtime.generate_requests()
    assert request.body["options"]["stop"] == ["\nUser:", "\nAssistant:"]


# --- An instruction model: chat messages -------------------------------------------------


@pytest.mark.parametrize(
    ("api", "path"), [("ollama", "/api/chat"), ("openai", "/v1/chat/completions")]
)
def test_a_chat_profile_sends_the_whole_context_as_messages_and_the_runtime_keeps_nothing(
    chat, runtime, settings, api, path
):
    use_api(settings, runtime, api)
    chat_profile()
    runtime.script = lambda prompt, body: f"Noted: {prompt}"
    chat("My dog is called Pixel.", profile="instruct")
    runtime.script = lambda prompt, body: "Your dog is called Pixel."
    chat("What is my dog called?", profile="instruct")
    first, second = runtime.generate_requests()
    assert first.path == second.path == path
    system = first.body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a helpful assistant.\n\n")
    assert "- calculator:" in system["content"]
    assert first.body["messages"][1:] == [{"role": "user", "content": "My dog is called Pixel."}]
    # The second call carries the whole context again: nothing is kept by the runtime.
    assert second.body["messages"] == [
        system,
        {"role": "user", "content": "My dog is called Pixel."},
        {"role": "assistant", "content": "Noted: My dog is called Pixel."},
        {"role": "user", "content": "What is my dog called?"},
    ]
    for request in (first, second):
        assert "prompt" not in request.body
        assert "context" not in request.body
        assert set(request.body) <= {"model", "messages", "stream", "options", "max_tokens"} | {
            "temperature",
            "stream_options",  # include_usage: the token counts of a streamed answer
        }
    if api == "ollama":
        assert second.body["options"] == {"temperature": 0.2}
    else:
        assert second.body["temperature"] == 0.2


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_a_tool_request_works_in_chat_messages(chat, runtime, settings, api):
    use_api(settings, runtime, api)
    chat_profile()

    def model(prompt: str, body: dict) -> str:
        if prompt.startswith("Tool result:"):
            return "It is 391."
        return '{"tool": "calculator", "arguments": {"expression": "17*23"}}'

    runtime.script = model
    job = chat("What is 17 times 23?", profile="instruct")
    assert reply(job) == "It is 391."
    first, second = runtime.generate_requests()
    assert "- calculator:" in first.body["messages"][0]["content"]
    *_, asked, told = second.body["messages"]
    assert asked == {
        "role": "assistant",
        "content": '{"tool": "calculator", "arguments": {"expression": "17*23"}}',
    }
    assert told["role"] == "user"
    assert '"value": 391' in told["content"]
    tool = Step.objects.get(job=job, kind="tool_call")
    assert tool.output["result"]["value"] == 391


# --- Clean replies --------------------------------------------------------------------------


def test_a_stored_reply_is_cleaned_and_the_raw_text_stays_in_the_step(chat, runtime):
    raw = '"Hello Pixel!"\n- camera: Takes a photo. Arguments: {"zoom": number}\nUser: And me?'
    runtime.script = lambda prompt, body: raw
    job = chat("My dog is Pixel.")
    assert reply(job) == "Hello Pixel!"
    assert Message.objects.get(role="assistant").content == "Hello Pixel!"
    call = Step.objects.get(job=job, kind="model_call")
    assert call.output["text"] == raw
    note = Step.objects.get(job=job, name="reply_cleaned")
    assert set(note.input["removed"]) == {"quotes", "tool_list", "invented_turn"}


def test_nothing_invented_is_fed_back_into_the_next_prompt(chat, runtime):
    replies = iter(["Nice name.\nUser: What is my cat called?\nAssistant: Felix.", "Ada."])
    runtime.script = lambda prompt, body: next(replies)
    chat("My name is Ada.")
    chat("What is my name?")
    second = runtime.prompts()[1]
    assert "User: My name is Ada.\nAssistant: Nice name.\n" in second
    # The message asked about shown again last, before the question.
    assert second.endswith("#1 User: My name is Ada.\n\nUser: What is my name?\nAssistant:")
    assert "cat" not in second and "Felix" not in second


def test_a_reply_that_is_empty_once_cleaned_is_asked_again_with_sampling(chat, runtime):
    replies = iter(["- search: Finds things. Arguments: {}", "Hello!"])
    runtime.script = lambda prompt, body: next(replies)
    job = chat("Hi")
    assert reply(job) == "Hello!"
    first, second = runtime.generate_requests()
    assert first.body["options"]["temperature"] == 0
    assert second.body["options"]["temperature"] > 0
    note = Step.objects.get(job=job, name="unusable_answer")
    assert note.input["problem"] == "Nothing was left of the answer once cleaned."


def test_a_chat_fails_when_every_answer_is_invented(chat, runtime):
    runtime.script = lambda prompt, body: Reply(text="User: hello?")
    job = chat("Hi")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert not Message.objects.filter(role="assistant").exists()


# --- Tasks on small models ------------------------------------------------------------------


@pytest.fixture
def key(make_key):
    return make_key()[0]


def test_an_arithmetic_task_in_plain_words_is_worked_out_step_by_step_without_the_model(
    key, runtime
):
    job = make_job(key, task="Add 17 and 25, then multiply by 3.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    steps = list(job.steps.all())
    assert [(s.kind, s.name, s.input["arguments"]["expression"]) for s in steps] == [
        ("tool_call", "calculator", "17 + 25"),
        ("tool_call", "calculator", "42 * 3"),
    ]
    assert runtime.generate_requests() == []
    assert job.final_result == {
        "text": "126",
        "answered_by": "calculator",
        "verified": True,
        "calculation": {
            "expression": "42 * 3",
            "value": 126,
            "steps": [
                {"expression": "17 + 25", "value": 42},
                {"expression": "42 * 3", "value": 126},
            ],
        },
    }


def test_a_task_that_asks_for_more_than_arithmetic_gets_the_calculation_in_its_prompt(key, runtime):
    runtime.script = lambda prompt, body: " It is 391."
    job = make_job(key, task="What is 17 * 23? Say it in a sentence.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert [(s.kind, s.name) for s in job.steps.all()] == [
        ("tool_call", "calculator"),
        ("model_call", "generate"),
    ]
    [prompt] = runtime.prompts()
    assert "Calculator: 17 * 23 = 391\n\nAnswer:" in prompt
    assert "calculator:" not in prompt  # still no tool list
    assert job.final_result["text"] == "It is 391."
    assert job.final_result["answered_by"] == "model"
    assert job.final_result["verified"] is False
    assert job.final_result["calculation"]["value"] == 391


def test_a_task_the_agent_cannot_check_is_labelled_as_the_models_answer(key, runtime):
    runtime.script = lambda prompt, body: " Eight apples."
    job = make_job(key, task="Tom has three bags with some apples in each. How many?")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert not job.steps.filter(kind="tool_call").exists()
    assert "calculation" not in job.final_result
    assert job.final_result["answered_by"] == "model"
    assert job.final_result["verified"] is False


def reading(expression: str, answer: str):
    """A model that writes ``expression`` when asked for a calculation, else ``answer``."""
    return lambda prompt, body: expression if prompt.endswith("Expression:") else answer


def test_a_word_problem_is_read_by_the_model_and_worked_out_by_the_calculator(key, runtime):
    runtime.script = reading(" 6 * 7", " Lots of eggs.")
    job = make_job(key, task="A box holds 6 eggs. How many eggs are in 7 boxes?")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert [(s.kind, s.name) for s in job.steps.all()] == [
        ("model_call", "read_arithmetic"),
        ("tool_call", "calculator"),
    ]
    [prompt] = runtime.prompts()
    assert prompt.endswith("Task: A box holds 6 eggs. How many eggs are in 7 boxes?\nExpression:")
    result = job.final_result
    assert (result["text"], result["answered_by"], result["verified"]) == ("42", "model", False)
    assert result["calculation"] == {"expression": "6 * 7", "value": 42, "read_by": "model"}


@pytest.mark.parametrize("expression", [" 6 * 8", " 42", " six times seven", " 6 * 7 * 7"])
def test_a_reading_with_numbers_the_task_does_not_have_goes_to_the_model(key, runtime, expression):
    runtime.script = reading(expression, " Lots of eggs.")
    job = make_job(key, task="A box holds 6 eggs. How many eggs are in 7 boxes?")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert not job.steps.filter(kind="tool_call").exists()
    assert job.steps.filter(kind="note", name="reading_dropped").exists()
    assert job.final_result["text"] == "Lots of eggs."
    assert (job.final_result["answered_by"], job.final_result["verified"]) == ("model", False)


def test_a_task_prompt_starts_with_the_task_prompt_not_the_chats_example(key, runtime):
    runtime.script = lambda prompt, body: " Leaves fall."
    job = make_job(key, task="Write a haiku about autumn.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    [prompt] = runtime.prompts()
    assert prompt.startswith(job.profile.task_prompt)
    assert "Tom" not in prompt and "bike" not in prompt
    assert prompt.endswith("Task: Write a haiku about autumn.\n\nAnswer:")


def test_an_empty_answer_to_a_task_is_asked_again_with_sampling(key, runtime):
    replies = iter(["", "\n", " Crisp leaves drift down."])
    runtime.script = lambda prompt, body: next(replies)
    job = make_job(key, task="Write a haiku about autumn.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert job.final_result["text"] == "Crisp leaves drift down."
    first, second, third = runtime.generate_requests()
    assert first.body["options"]["temperature"] == 0
    assert second.body["options"]["temperature"] == third.body["options"]["temperature"] == 0.7
    assert first.body["prompt"] == second.body["prompt"] == third.body["prompt"]


def test_a_task_without_arithmetic_calls_no_calculator(key, runtime):
    runtime.script = lambda prompt, body: "Hello there."
    job = make_job(key, task="Say hello to the team.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert [s.kind for s in job.steps.all()] == ["model_call"]
    assert "calculation" not in job.final_result
    stop = runtime.generate_requests()[0].body["options"]["stop"]
    assert "\nTask:" in stop
    assert "\n\n" not in stop  # it ends the answer after its first word (below)


def test_a_base_models_answer_that_starts_with_a_blank_line_ends_at_the_next_one(key, runtime):
    answer = "\n\nCrisp leaves drift down,\nthe old oak sighs.\n\nMore."
    runtime.script = lambda prompt, body: answer
    job = make_job(key, task="Write a haiku about autumn.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert job.final_result["text"] == "Crisp leaves drift down,\nthe old oak sighs."


def test_a_chat_profiles_task_is_sent_as_messages_with_its_tools(key, runtime):
    profile = chat_profile()
    runtime.script = lambda prompt, body: "Done."
    job = make_job(key, task="Explain what 17 * 23 means.", profile=profile)
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    [request] = runtime.generate_requests()
    assert request.path == "/api/chat"
    system, user = request.body["messages"]
    assert "- calculator:" in system["content"]
    assert user == {"role": "user", "content": "Task: Explain what 17 * 23 means."}
    assert not Step.objects.filter(job=job, kind="tool_call").exists()


def test_a_task_answer_is_cleaned(key, runtime):
    runtime.script = lambda prompt, body: '"Hello team."\nTask: Say goodbye.'
    job = make_job(key, task="Say hello to the team.")
    assert tasks.run_job(job.pk) == JobStatus.FINISHED
    job.refresh_from_db()
    assert job.final_result["text"] == "Hello team."
    assert json.loads(json.dumps(job.final_result))["rounds"] == 1
