"""The chat agent end to end: POST /agent/chat, the chat job against the scripted loopback
runtime, history, retrieval, the summary, the budget, ordering and exactly-once replies."""

import re

import pytest
from django.conf import settings

from agents import runner
from agents.models import AgentProfile, Job, JobStatus, Step
from conversations import services, tokens
from conversations.models import Conversation, Message
from gateway import runtime as runtime_client
from tests.factories import default_profile, tools_listed_profile

pytestmark = pytest.mark.django_db

SCOPE = {"source": "web", "scope_type": "ticket", "scope_id": 42}
FACT = "By the way, my locker code is 4821."


@pytest.fixture
def chat(agent_client, sync_queue, django_capture_on_commit_callbacks):
    """Posts a chat and runs its job inline, as a worker would once the request commits."""

    def post(prompt: str, **fields) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            response = agent_client.post(
                "/agent/chat", {**SCOPE, "prompt": prompt, **fields}, format="json"
            )
        assert response.status_code == 200, response.json()
        return response.json()["data"]

    return post


def last_user_line(prompt: str) -> str:
    return [line for line in prompt.splitlines() if line.startswith("User: ")][-1][6:]


def replying(prompt: str, body: dict) -> str:
    """A scripted model: a summary when asked for one, else an echo of the question."""
    if prompt.endswith("Updated summary:"):
        return "The user asked many things about the weather."
    return f"You said: {last_user_line(prompt)}"


def reply_of(job_id: str) -> str:
    job = Job.objects.get(pk=job_id)
    assert job.status == JobStatus.FINISHED, job.error
    return job.final_result["message"]["content"]


def filler(index: int) -> str:
    topics = ("the weather", "a recipe", "the train times", "a birthday", "the garden")
    return f"Message {index} is about {topics[index % len(topics)]} and nothing else."


def long_conversation(api_key, size: int, facts: dict[int, str] | None = None) -> Conversation:
    """A conversation of the key's owner in SCOPE with ``size`` messages, bulk-created."""
    profile = AgentProfile.objects.get(name="default")
    conversation = services.conversation_get_or_create(
        owner_id=api_key.owner_id,
        source=SCOPE["source"],
        scope_type=SCOPE["scope_type"],
        scope_id=str(SCOPE["scope_id"]),
        profile=profile,
    )
    facts = facts or {}
    services.messages_import(
        conversation=conversation,
        messages=(
            ("user" if seq % 2 else "assistant", facts.get(seq) or filler(seq))
            for seq in range(1, size + 1)
        ),
    )
    return conversation


@pytest.fixture
def owner_key(make_key, agent_client):
    """The ApiKey row behind ``agent_client``."""
    from gateway.models import ApiKey

    return ApiKey.objects.get()


def small_profile(**fields) -> AgentProfile:
    defaults = {
        "name": "small",
        "model": settings.AGENT_MODEL,
        "system_prompt": "A conversation with a helpful assistant.",
        "context_window": 600,
        "answer_reserve": 100,
        "max_steps": 3,
        "tools": ["search_history", "read_history"],
        "options": {"stop": ["\nUser:"]},
    }
    return AgentProfile.objects.create(**{**defaults, **fields})


def step_names(job_id: str) -> list[tuple[str, str]]:
    return list(Step.objects.filter(job_id=job_id).order_by("index").values_list("kind", "name"))


# --- Starting a chat --------------------------------------------------------------------


def test_a_chat_is_acknowledged_as_a_queued_job_of_its_conversation(agent_client, runtime):
    response = agent_client.post("/agent/chat", {**SCOPE, "prompt": "Hello"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    data = body["data"]
    assert data["status"] == "queued"
    assert data["job_id"].startswith("job_")
    job = Job.objects.get(pk=data["job_id"])
    assert job.kind == "chat"
    assert job.conversation_id == data["conversation_id"]
    [message] = Message.objects.filter(conversation_id=data["conversation_id"])
    assert (message.role, message.content, message.job_id) == ("user", "Hello", job.pk)


def test_the_users_message_is_stored_with_the_job_before_any_worker_runs(agent_client, runtime):
    """Nothing is lost if no worker ever picks the job up: the message is in the database."""
    data = agent_client.post("/agent/chat", {**SCOPE, "prompt": "Keep me"}, format="json").json()
    conversation = agent_client.get(f"/agent/conversation/{data['data']['conversation_id']}")
    assert [m["content"] for m in conversation.json()["data"]["messages"]] == ["Keep me"]


def test_the_request_counts_by_the_heuristic_without_asking_the_runtime(agent_client, runtime):
    """A single-slot runtime would make the request wait behind a generation."""
    data = agent_client.post(
        "/agent/chat", {**SCOPE, "prompt": "one two three, four!"}, format="json"
    ).json()["data"]
    message = Message.objects.get(job_id=data["job_id"])
    assert message.token_estimate == tokens.estimate("one two three, four!")
    assert runtime.requests == []


def test_the_worker_recounts_the_message_with_the_runtimes_tokenizer(chat, runtime):
    runtime.script = replying
    data = chat("one two three, four!")
    message = Message.objects.get(job_id=data["job_id"], role="user")
    assert message.token_estimate == 4  # the loopback runtime's tokenizer counts words
    assert any(r.path == "/api/tokenize" for r in runtime.requests)


def test_without_a_tokenizer_the_message_is_counted_by_the_heuristic(agent_client, runtime):
    runtime.tokenizer = False
    data = agent_client.post(
        "/agent/chat", {**SCOPE, "prompt": "one two three, four!"}, format="json"
    ).json()["data"]
    message = Message.objects.get(job_id=data["job_id"])
    assert message.token_estimate == tokens.estimate("one two three, four!")


def test_a_string_and_an_integer_scope_id_name_the_same_conversation(agent_client, runtime):
    first = agent_client.post("/agent/chat", {**SCOPE, "prompt": "a"}, format="json").json()
    scope = {**SCOPE, "scope_id": str(SCOPE["scope_id"])}
    second = agent_client.post("/agent/chat", {**scope, "prompt": "b"}, format="json").json()
    assert first["data"]["conversation_id"] == second["data"]["conversation_id"]
    assert Conversation.objects.count() == 1


def test_another_scope_is_another_conversation(agent_client, runtime):
    first = agent_client.post("/agent/chat", {**SCOPE, "prompt": "a"}, format="json").json()
    other = {**SCOPE, "scope_id": 43}
    second = agent_client.post("/agent/chat", {**other, "prompt": "b"}, format="json").json()
    assert first["data"]["conversation_id"] != second["data"]["conversation_id"]


def test_a_named_profile_runs_the_chat(agent_client, runtime):
    profile = small_profile()
    data = agent_client.post(
        "/agent/chat", {**SCOPE, "prompt": "hi", "profile": "small"}, format="json"
    ).json()["data"]
    assert Job.objects.get(pk=data["job_id"]).profile == profile


# --- The chat job -----------------------------------------------------------------------


def test_the_reply_is_the_jobs_result_and_is_stored_in_the_conversation(chat, runtime):
    runtime.script = replying
    data = chat("What is the weather like?")
    job = Job.objects.get(pk=data["job_id"])
    assert job.status == JobStatus.FINISHED, job.error
    assert job.final_result["conversation_id"] == data["conversation_id"]
    assert job.final_result["message"]["role"] == "assistant"
    assert job.final_result["message"]["content"] == "You said: What is the weather like?"
    roles = list(Message.objects.order_by("seq").values_list("role", "content"))
    assert roles == [
        ("user", "What is the weather like?"),
        ("assistant", "You said: What is the weather like?"),
    ]


def test_the_job_records_its_context_and_its_model_call(chat, runtime):
    runtime.script = replying
    data = chat("Hello")
    assert step_names(data["job_id"]) == [("context", "build_context"), ("model_call", "reply")]
    context = Step.objects.get(job_id=data["job_id"], kind="context")
    assert context.output["whole_history"] is True
    assert context.output["used_tokens"] <= context.output["budget"]


def test_the_history_is_in_the_second_prompt(chat, runtime):
    runtime.script = replying
    chat("My name is Ann and I like green tea.")
    runtime.script = lambda prompt, body: "You like green tea."
    chat("What do I like?")
    first, second = runtime.prompts()
    assert "My name is Ann" not in first.split("User: My name is Ann")[0]
    assert "User: My name is Ann and I like green tea.\n" in second
    assert "Assistant: You said: My name is Ann and I like green tea.\n" in second
    assert second.endswith("User: What do I like?\nAssistant:")


def test_the_prompt_is_a_plain_transcript_for_a_base_model(chat, runtime):
    runtime.script = replying
    chat("Hi")
    [prompt] = runtime.prompts()
    default = AgentProfile.objects.get(name="default")
    assert prompt.startswith(default.system_prompt)
    assert prompt.endswith("User: Hi\nAssistant:")
    [request] = runtime.generate_requests()
    assert request.body["options"]["stop"] == default.options["stop"]


def test_a_fact_from_message_37_of_5000_reaches_the_prompt_by_the_agents_own_retrieval(
    chat, runtime, owner_key
):
    long_conversation(owner_key, 5000, facts={37: FACT})
    runtime.script = lambda prompt, body: (
        "Your locker code is 4821." if FACT in prompt else "I do not know."
    )
    data = chat("What is my locker code?")
    assert reply_of(data["job_id"]) == "Your locker code is 4821."
    prompts = runtime.prompts()
    assert FACT in prompts[0]  # the first model call already had it: no help from the model
    # The default (transcript) profile shows what was found last, just before the question.
    earlier = prompts[0].split("\n\nEarlier in the conversation:\n")[1]
    assert f"User: {FACT}\n" in earlier
    assert earlier.endswith("\n\nUser: What is my locker code?\nAssistant:")
    steps = step_names(data["job_id"])
    assert steps[:2] == [("context", "build_context"), ("tool_call", "search_history")]
    assert steps.index(("context", "build_context"), 1) == steps.index(("model_call", "reply")) - 1
    search = Step.objects.filter(job_id=data["job_id"], name="search_history").first()
    assert search.input["arguments"]["query"] == "What is my locker code?"
    assert search.output["result"]["mode"] == "hybrid"
    assert search.output["result"]["messages"][0]["seq"] == 37


def all_text(body: dict) -> str:
    """Everything a chat-style model call sent: its messages' contents, in order."""
    return "\n".join(message["content"] for message in body["messages"])


def test_a_fact_from_message_37_reaches_the_prompt_when_the_model_asks_for_search_history(
    chat, runtime, owner_key
):
    tools_listed_profile()
    long_conversation(owner_key, 5000, facts={37: FACT})

    def model(prompt: str, body: dict) -> str:
        if FACT in all_text(body):
            return "It is 4821."
        if "Tool result" not in prompt:
            return '{"tool": "search_history", "arguments": {"query": "locker"}}'
        return "I could not find it."

    runtime.script = model
    # Nothing in this question matches the fact, so the agent's own search misses it.
    data = chat("Which digits did I give you for the gym?")
    assert reply_of(data["job_id"]) == "It is 4821."
    first, second = (request.body for request in runtime.generate_requests()[:2])
    assert FACT not in all_text(first)
    assert FACT in all_text(second)
    assert second["messages"][-2:] == [
        {
            "role": "assistant",
            "content": '{"tool": "search_history", "arguments": {"query": "locker"}}',
        },
        {
            "role": "user",
            "content": "Tool result: 1 messages found; those that fit are shown above under "
            "the earlier history.",
        },
    ]
    model_search = Step.objects.filter(job_id=data["job_id"], name="search_history").last()
    assert model_search.input == {"arguments": {"query": "locker"}}
    assert model_search.output["result"]["messages"][0]["seq"] == 37


def test_a_base_models_echo_of_a_tool_call_in_the_users_message_is_not_run(chat, runtime):
    call = '{"tool": "read_history", "arguments": {"limit": 5}}'
    runtime.script = lambda prompt, body: call if "Updated summary" not in prompt else "-"
    data = chat(f"Please answer with exactly this: {call}")
    job = Job.objects.get(pk=data["job_id"])
    assert not Step.objects.filter(job=job, kind="tool_call", name="read_history").exists()
    notes = Step.objects.filter(job=job, kind="note", name="unusable_answer")
    assert notes.exists()
    assert all(n.input["tool"] == "read_history" for n in notes)
    # Asked again with sampling, as for any unusable answer; never run.
    assert job.status == JobStatus.FAILED
    assert "no usable answer" in job.error


VAULT = "Please keep this safe: the vault code is 5-1-7-3-9."


def test_long_recent_messages_leave_room_for_the_message_retrieval_found(chat, runtime, owner_key):
    """Pastes of about 1,100 tokens each at the end of the history (default profile,
    2,048-token window) no longer crowd out the message the agent's search found."""
    paste = " ".join(["lorem"] * 550)  # 1,100 tokens by the heuristic
    contents = {1: VAULT, 2: "Noted."}
    contents.update({seq: f"Log paste {seq}: {paste}" for seq in range(37, 41)})
    long_conversation(owner_key, 40, facts=contents)
    runtime.script = lambda prompt, body: "It is 5-1-7-3-9." if VAULT in prompt else "No idea."
    data = chat("What is the vault code I told you at the start?")
    assert reply_of(data["job_id"]) == "It is 5-1-7-3-9."
    prompt = runtime.prompts()[0]
    assert re.search(
        r"Earlier in the conversation:\n#1 \(just now\) User: " + re.escape(VAULT), prompt
    )
    assert "[message cut: about " in prompt  # the newest paste, clipped in the prompt only
    built = Step.objects.filter(job_id=data["job_id"], name="build_context").last()
    assert built.output["retrieved_messages"] >= 1
    assert 1 in built.output["retrieved_seqs"]
    [clipped] = built.output["clipped"]
    assert clipped["part"] == "recent" and clipped["seq"] in (39, 40)
    assert clipped["shown_tokens"] < clipped["tokens"]
    assert built.output["used_tokens"] <= built.output["budget"]
    stored = Message.objects.get(conversation_id=data["conversation_id"], seq=clipped["seq"])
    assert stored.content.endswith(paste)  # clipped in the prompt, never in storage


def test_the_prompt_says_how_many_earlier_messages_are_not_shown(chat, runtime, owner_key):
    long_conversation(owner_key, 300)
    runtime.script = replying
    chat("What about the garden?")
    prompt = runtime.prompts()[0]
    hidden = int(re.search(r"\((\d+) earlier messages are not shown here\.\)", prompt).group(1))
    shown = len(
        re.findall(r"^(?:#\d+(?: \([^)]*\))? )?(?:User|Assistant): Message \d+", prompt, re.M)
    )
    assert hidden + shown == 300
    # The default profile's base model gets no tool list; its agent retrieves by itself.
    assert "search_history" not in prompt
    assert ("tool_call", "search_history") in step_names(Job.objects.get().pk)


def test_a_chat_models_system_message_says_what_is_hidden_and_names_the_tools(
    chat, runtime, owner_key
):
    small_profile(prompt_style="chat", context_window=2048, answer_reserve=256)
    long_conversation(owner_key, 300)
    runtime.script = lambda prompt, body: "Fine."
    chat("What about the garden?", profile="small")
    request = runtime.generate_requests()[0]  # (the second folds history into the summary)
    assert request.path == "/api/chat"
    system, *turns = request.body["messages"]
    assert system["role"] == "system"
    hidden = int(re.search(r"\((\d+) earlier messages are not shown here\.", system["content"])[1])
    retrieved = re.findall(
        r"^#\d+(?: \([^)]*\))? (?:User|Assistant): Message \d+", system["content"], re.M
    )
    recent = [m for m in turns if m["content"].startswith("Message ")]
    assert hidden + len(retrieved) + len(recent) == 300
    assert "- search_history:" in system["content"]
    assert "- read_history:" in system["content"]
    assert turns[-1] == {"role": "user", "content": "What about the garden?"}
    # The summary is asked as one instruction.
    summarize = runtime.generate_requests()[1]
    assert summarize.path == "/api/chat"
    [asked] = summarize.body["messages"]
    assert asked["role"] == "user"
    assert asked["content"].endswith("Updated summary:")


def test_a_summary_is_produced_and_then_used(chat, runtime, owner_key):
    small_profile()
    long_conversation(owner_key, 40)
    summaries = []

    def model(prompt: str, body: dict) -> str:
        if prompt.endswith("Updated summary:"):
            summaries.append(prompt)
            return "Ann likes green tea and lives in Oslo."
        return "Noted."

    runtime.script = model
    first = chat("Tell me about the garden.", profile="small")
    assert reply_of(first["job_id"]) == "Noted."
    assert len(summaries) == 1
    assert ("model_call", "summarize") in step_names(first["job_id"])
    conversation = Conversation.objects.get()
    assert conversation.summary == "Ann likes green tea and lives in Oslo."
    assert conversation.summary_until_seq > 0
    assert f"User: {filler(1)}" in summaries[0]  # it folds the oldest messages first
    summary_request = runtime.generate_requests()[-1]
    assert summary_request.body["options"]["num_predict"] <= 100

    chat("And where do I live?", profile="small")
    last_reply = [p for p in runtime.prompts() if not p.endswith("Updated summary:")][-1]
    assert (
        f"Summary of the conversation up to message {conversation.summary_until_seq}:\n"
        "Ann likes green tea and lives in Oslo."
    ) in last_reply


def test_a_summary_moves_forward_and_folds_the_previous_one_in(chat, runtime, owner_key):
    small_profile()
    long_conversation(owner_key, 60)
    runtime.script = lambda prompt, body: (
        f"summary {prompt.count('Summary of the conversation')}"
        if prompt.endswith("Updated summary:")
        else "ok"
    )
    chat("first", profile="small")
    until = Conversation.objects.get().summary_until_seq
    chat("second", profile="small")
    conversation = Conversation.objects.get()
    assert conversation.summary_until_seq > until
    assert conversation.summary == "summary 1"  # the second summary saw the first


def test_a_failed_summary_does_not_fail_the_chat(chat, runtime, owner_key):
    from tests.runtime_server import Reply

    small_profile()
    long_conversation(owner_key, 40)
    runtime.script = lambda prompt, body: (
        Reply(status=500, error="boom") if prompt.endswith("Updated summary:") else "fine"
    )
    data = chat("hello", profile="small")
    assert reply_of(data["job_id"]) == "fine"
    assert ("note", "summary_skipped") in step_names(data["job_id"])
    assert Conversation.objects.get().summary == ""


def _assert_within_budget(runtime, profile: AgentProfile, count) -> None:
    prompts = runtime.prompts()
    assert prompts
    for prompt in prompts:
        assert count(prompt) <= profile.prompt_budget, prompt
    for step in Step.objects.filter(kind="context"):
        assert step.output["used_tokens"] <= step.output["budget"] <= profile.prompt_budget, (
            step.output
        )


@pytest.mark.parametrize("tokenizer", [True, False], ids=["runtime-tokenizer", "heuristic"])
def test_no_prompt_exceeds_the_budget(chat, runtime, owner_key, tokenizer):
    runtime.tokenizer = tokenizer
    profile = small_profile(tools=["search_history", "read_history", "calculator"])
    long_conversation(owner_key, 400, facts={37: FACT, 101: "The wifi password is tulip77."})
    asked = {"n": 0}

    def model(prompt: str, body: dict) -> str:
        if prompt.endswith("Updated summary:"):
            return "A long summary. " * 200  # far beyond its share: it is cut to fit
        asked["n"] += 1
        if asked["n"] % 3 == 1:
            return '{"tool": "search_history", "arguments": {"query": "weather", "limit": 50}}'
        if asked["n"] % 3 == 2:
            return '{"tool": "read_history", "arguments": {"before_seq": 200, "limit": 50}}'
        return "word " * 90

    runtime.script = model
    for question in (
        "What is my locker code?",
        "What is the wifi password? " + "Please answer precisely. " * 20,
        "Tell me about the train times and the birthday and the garden.",
        "x",
    ):
        chat(question, profile="small")
    assert Conversation.objects.get().summary  # the summary was used in later prompts
    runtime.tokenizer = True
    runtime_client.forget_tokenizers()
    if tokenizer:  # messages were counted by the runtime: so is the prompt
        count = lambda p: runtime_client.count_tokens(settings.AGENT_MODEL, p)  # noqa: E731
    else:
        count = tokens.estimate
    _assert_within_budget(runtime, profile, count)


def test_a_message_too_long_for_the_window_is_refused(agent_client, runtime):
    small_profile()
    response = agent_client.post(
        "/agent/chat", {**SCOPE, "prompt": "word " * 1000, "profile": "small"}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error"
    assert "Too long" in body["details"]["fields"]["prompt"][0]
    assert not Job.objects.exists()


def test_the_model_may_use_the_calculator_in_a_chat(chat, runtime):
    tools_listed_profile()

    def model(prompt: str, body: dict) -> str:
        if "Tool result" in prompt:
            return "It is " + re.search(r'"value": (\d+)', prompt).group(1) + "."
        return '{"tool": "calculator", "arguments": {"expression": "6*7"}}'

    runtime.script = model
    data = chat("What is six times seven?")
    assert reply_of(data["job_id"]) == "It is 42."


def test_a_chat_whose_model_keeps_asking_for_tools_fails_after_max_steps(chat, runtime):
    small_profile(max_steps=2, prompt_style="chat", tools=["calculator", "read_history"])
    runtime.script = lambda prompt, body: '{"tool": "calculator", "arguments": {}}'
    data = chat("hi", profile="small")
    job = Job.objects.get(pk=data["job_id"])
    assert job.status == JobStatus.FAILED
    assert "last allowed call" in job.error
    # The first call listed the tools, the last one offered none.
    first, last = (r.body["messages"][0]["content"] for r in runtime.generate_requests())
    assert "- calculator:" in first
    assert "- calculator:" not in last
    assert Message.objects.filter(role="assistant").count() == 0


# --- Order and exactly once ---------------------------------------------------------------


def test_concurrent_chats_are_all_stored_in_arrival_order(
    agent_client, runtime, django_capture_on_commit_callbacks
):
    runtime.script = replying
    with django_capture_on_commit_callbacks():  # started, none run yet
        job_ids = [
            agent_client.post(
                "/agent/chat", {**SCOPE, "prompt": f"question {n}"}, format="json"
            ).json()["data"]["job_id"]
            for n in range(5)
        ]
    # Deliveries arrive in any order, some twice; a chat runs only when it is its turn.
    deliveries = [job_ids[n] for n in (4, 2, 0, 0, 3, 1, 4, 2, 3, 1, 2, 3, 4, 1, 3, 4, 4)]
    outcomes = [runner.run_job(job_id) for job_id in deliveries]
    assert outcomes.count("finished") == 5
    assert all(Job.objects.get(pk=pk).status == JobStatus.FINISHED for pk in job_ids)
    messages = list(Message.objects.order_by("seq").values_list("role", "content", "job_id"))
    expected = []
    for n, job_id in enumerate(job_ids):
        expected += [
            ("user", f"question {n}", job_id),
            ("assistant", f"You said: question {n}", job_id),
        ]
    assert messages == expected
    # Each chat saw the earlier chats' questions and answers, and none of the later ones.
    prompts = runtime.prompts()
    assert [last_user_line(p) for p in prompts] == [f"question {n}" for n in range(5)]
    assert "Assistant: You said: question 3\nUser: question 4\nAssistant:" in prompts[4]
    assert "question 1" not in prompts[0]


def test_chats_posted_from_threads_share_one_conversation_and_lose_nothing(
    transactional_db, make_key, runtime
):
    import threading

    from django.db import connection
    from rest_framework.test import APIClient

    default_profile()  # an earlier transactional test's flush may have removed it
    _, plain = make_key(name="threads")
    results: list[dict] = []
    errors: list[BaseException] = []

    def post(n: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
        try:
            response = client.post("/agent/chat", {**SCOPE, "prompt": f"p{n}"}, format="json")
            results.append(response.json())
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=post, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(r["ok"] for r in results), results
    assert len({r["data"]["conversation_id"] for r in results}) == 1
    seqs = list(Message.objects.values_list("seq", flat=True))
    assert len(seqs) == 6 and len(set(seqs)) == 6
    conversation = Conversation.objects.get()
    assert conversation.message_count == 6
    # Jobs were created in the order their messages were numbered.
    jobs = Job.objects.order_by("created_at").values_list("pk", flat=True)
    by_seq = Message.objects.order_by("seq").values_list("job_id", flat=True)
    assert list(jobs) == list(by_seq)


def test_the_reply_is_stored_once_when_the_job_is_delivered_twice(chat, runtime):
    runtime.script = replying
    data = chat("Only once, please.")
    job = Job.objects.get(pk=data["job_id"])
    calls = len(runtime.prompts())
    # The worker died after storing the reply: the reaper put the job back in the queue.
    Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED, finished_at=None)
    assert runner.run_job(job.pk) == JobStatus.FINISHED
    assert runner.run_job(job.pk) == "not claimed"
    assert Message.objects.filter(job=job, role="assistant").count() == 1
    assert len(runtime.prompts()) == calls  # the model was not asked again
    job.refresh_from_db()
    assert job.final_result["message"]["content"] == "You said: Only once, please."
    assert ("note", "reply_already_stored") in step_names(job.pk)


def test_a_reply_stored_by_another_worker_meanwhile_wins(chat, runtime, agent_client):
    """The race the first look cannot see: the unique index refuses the second reply."""
    from agents import services as job_services
    from conversations.services import message_store_reply

    data = agent_client.post("/agent/chat", {**SCOPE, "prompt": "race"}, format="json").json()
    job = job_services.job_claim(data["data"]["job_id"], token="worker-a")
    first = message_store_reply(job=job, token="worker-a", content="first", token_estimate=1)
    Message.objects.filter(pk=first.pk).update(job=None)  # hide it from the first look
    with pytest.raises(Exception, match=r"(?i)unique|constraint"):
        message_store_reply(job=job, token="worker-a", content="second", token_estimate=1)
    assert list(Message.objects.filter(role="assistant").values_list("content", flat=True)) == [
        "first"
    ]


def test_a_worker_that_lost_the_job_stores_no_reply(agent_client, runtime):
    from agents import services as job_services
    from conversations.services import message_store_reply

    data = agent_client.post("/agent/chat", {**SCOPE, "prompt": "late"}, format="json").json()
    job = job_services.job_claim(data["data"]["job_id"], token="worker-a")
    with pytest.raises(job_services.LeaseLost):
        message_store_reply(job=job, token="worker-b", content="stale", token_estimate=1)
    assert not Message.objects.filter(role="assistant").exists()


# --- Task jobs and the history tools ---------------------------------------------------------


def test_a_task_job_can_search_the_conversation_of_its_scope(
    agent_client, runtime, owner_key, sync_queue, django_capture_on_commit_callbacks
):
    tools_listed_profile()
    long_conversation(owner_key, 200, facts={37: FACT})

    def model(prompt: str, body: dict) -> str:
        if "Tool result" in prompt:
            return "Found: " + ("4821" if "4821" in prompt else "nothing")
        return '{"tool": "search_history", "arguments": {"query": "locker code"}}'

    runtime.script = model
    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(
            "/agent/job/start", {**SCOPE, "task": "Find the locker code."}, format="json"
        )
    job = Job.objects.get(pk=response.json()["data"]["job_id"])
    assert job.status == JobStatus.FINISHED, job.error
    assert job.final_result["text"] == "Found: 4821"


def test_a_task_job_without_a_conversation_gets_a_tool_error(
    agent_client, runtime, sync_queue, django_capture_on_commit_callbacks
):
    tools_listed_profile()
    runtime.script = lambda prompt, body: (
        "done" if "Tool result" in prompt else '{"tool": "read_history", "arguments": {}}'
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(
            "/agent/job/start", {**SCOPE, "task": "Read the history."}, format="json"
        )
    job = Job.objects.get(pk=response.json()["data"]["job_id"])
    assert job.status == JobStatus.FINISHED
    step = Step.objects.get(job=job, name="read_history")
    assert step.status == "failed"
    assert "no conversation" in step.output["error"]
