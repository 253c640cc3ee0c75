"""The pieces under the chat agent: token counting, full-text search, the context builder."""

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import AgentProfile, PromptStyle
from conversations import search, services, tokens
from conversations.context import History, Item, build_context
from conversations.frame import BLOCK_COST, SAFETY_MARGIN, message_limit, tools_block
from conversations.models import Conversation, Message
from conversations.render import transcript
from gateway import protocols, routing
from gateway import runtime as runtime_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(make_key):
    return make_key(name="owner")[0].owner


def profile(**fields) -> AgentProfile:
    defaults = {
        "name": "ctx",
        "model": settings.AGENT_MODEL,
        "system_prompt": "System.",
        "context_window": 1000,
        "answer_reserve": 100,
        "tools": ["search_history", "read_history"],
    }
    return AgentProfile.objects.create(**{**defaults, **fields})


def conversation_with(owner, contents: list[str], scope_id: str = "1") -> Conversation:
    conversation = services.conversation_get_or_create(
        owner_id=owner.pk,
        source="web",
        scope_type="t",
        scope_id=scope_id,
        profile=AgentProfile.objects.get(name="default"),
    )
    services.messages_import(
        conversation=conversation,
        messages=[("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(contents)],
    )
    return conversation


def build(conversation: Conversation, agent: AgentProfile, question: str, **kwargs):
    """The context for a new message after the conversation's last one."""
    conversation.refresh_from_db()
    seq = conversation.last_seq + 1
    message = Item(seq=seq, role="user", content=question, tokens=tokens.estimate(question))
    history = History(conversation.pk, seq)
    return build_context(
        profile=agent, conversation=conversation, message=message, history=history, **kwargs
    )


# --- Tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "The quick brown fox jumps over the lazy dog.",
        "4821 and 1234567890",
        '{"tool": "search_history", "arguments": {"query": "x"}}',
        "naïve café — 東京 🙂",
        "line one\nline two\n\nline four",
        "a" * 100,
    ],
)
def test_the_heuristic_never_counts_fewer_tokens_than_words(text):
    assert tokens.estimate(text) >= len(text.split())


def test_the_heuristic_counts_digits_symbols_and_other_scripts_one_by_one():
    assert tokens.estimate("4821") == 4
    assert tokens.estimate("{}") == 2
    assert tokens.estimate("東京") == 2
    assert tokens.estimate("hello") == 2  # ceil(5 / 4)
    assert tokens.estimate("") == 0


def test_the_heuristic_of_joined_pieces_is_the_sum_plus_the_newlines():
    pieces = ["User: hello there", "Assistant: 42, of course!", "#7 User: naïve"]
    assert tokens.estimate("\n".join(pieces)) == sum(map(tokens.estimate, pieces)) + 2


def test_fit_text_cuts_at_a_word_boundary_within_the_limit():
    text = "alpha beta gamma delta epsilon " * 10
    cut = tokens.fit_text(text, 12)
    assert tokens.estimate(cut) <= 12
    assert text.startswith(cut.removesuffix(" …"))
    assert tokens.fit_text("short", 12) == "short"


def test_ollama_counts_with_api_tokenize_and_remembers_it(runtime):
    assert runtime_client.count_tokens(settings.AGENT_MODEL, "one two three") == 3
    assert runtime_client.count_tokens(settings.AGENT_MODEL, "four five") == 2
    paths = [r.path for r in runtime.requests]
    assert paths == ["/api/tokenize", "/api/tokenize"]
    assert runtime.requests[0].body == {"model": settings.AGENT_MODEL, "content": "one two three"}


def test_llama_cpp_python_counts_with_extras_tokenize_count(runtime, settings):
    settings.MODEL_RUNTIME_API = "openai"
    routing.clear_cache()
    assert runtime_client.count_tokens("test-model", "one two three") == 3
    [request] = runtime.requests
    assert request.path == "/extras/tokenize/count"
    assert request.body == {"model": "test-model", "input": "one two three"}


def test_llama_cpp_counts_with_tokenize(runtime, settings, monkeypatch):
    settings.MODEL_RUNTIME_API = "openai"
    routing.clear_cache()
    monkeypatch.setitem(protocols.TOKENIZE_PATHS, "openai", ("/tokenize",))
    assert runtime_client.count_tokens("test-model", "one two three four") == 4
    [request] = runtime.requests
    assert (request.path, request.body) == ("/tokenize", {"content": "one two three four"})


def test_a_runtime_without_a_tokenizer_is_probed_once(runtime, settings):
    settings.MODEL_RUNTIME_API = "openai"
    routing.clear_cache()
    runtime.tokenizer = False
    assert runtime_client.count_tokens("test-model", "one two") is None
    assert runtime_client.count_tokens("test-model", "three") is None
    assert [r.path for r in runtime.requests] == ["/extras/tokenize/count", "/tokenize"]
    assert tokens.count("test-model", "one two") == tokens.estimate("one two")


def test_an_unknown_model_is_not_taken_for_a_missing_tokenizer(runtime):
    assert runtime_client.count_tokens("no-such-model", "one two") is None
    assert runtime_client.count_tokens(settings.AGENT_MODEL, "one two") == 2


def test_an_unreachable_runtime_falls_back_to_the_heuristic(settings, unused_port):
    settings.MODEL_RUNTIME_URL = f"http://127.0.0.1:{unused_port}"
    settings.MODEL_RUNTIME_API = "ollama"
    routing.clear_cache()
    try:
        assert runtime_client.count_tokens("m", "one two") is None
        assert tokens.count("m", "one two") == tokens.estimate("one two")
    finally:
        routing.clear_cache()


# --- Search -------------------------------------------------------------------------------


def test_keywords_leave_out_stopwords_and_repeats():
    assert search.keywords("What is my locker code? My LOCKER code!") == ["locker", "code"]
    assert search.keywords("Do you remember what I told you?") == []
    assert search.keywords("room 7 and 12") == ["room", "7", "12"]


def test_search_finds_by_stem_and_ranks_the_better_match_first(owner):
    conversation = conversation_with(
        owner,
        [
            "The lockers at the gym are new.",
            "My locker code is 4821.",
            "The weather is fine.",
            "Nothing about that here.",
        ],
    )
    found = search.search_messages(
        conversation_id=conversation.pk, query="what was the code of my locker", limit=5
    )
    assert [row["seq"] for row in found][:2] == [2, 1]
    assert found[0]["content"] == "My locker code is 4821."
    assert set(found[0]) >= {"seq", "role", "content", "token_estimate", "created_at", "score"}


def test_search_stays_within_its_conversation_and_before_seq(owner):
    mine = conversation_with(owner, ["apple pie", "pear", "apple tart", "banana"])
    conversation_with(owner, ["apple everywhere"] * 3, scope_id="2")
    found = search.search_messages(conversation_id=mine.pk, query="apple", limit=10)
    assert sorted(row["seq"] for row in found) == [1, 3]
    before = search.search_messages(conversation_id=mine.pk, query="apple", limit=10, before_seq=3)
    assert [row["seq"] for row in before] == [1]


@pytest.mark.parametrize("query", ["red bicycle blue car", "note red bicycle blue car"])
def test_an_old_message_with_more_of_the_words_outranks_newer_ones(owner, query):
    contents = [
        (f"note {n}: the red bicycle", f"note {n}: the blue car", f"note {n}: a quiet day")[n % 3]
        for n in range(600)
    ]
    contents[7] = "the red bicycle and the blue car were both in the garage"
    conversation = conversation_with(owner, contents)
    found = search.search_messages(conversation_id=conversation.pk, query=query, limit=3)
    assert found[0]["seq"] == 8


def database_rank(conversation_id: str, seq: int, words: str) -> float:
    """The database's own rank of one message for ``words`` (any of them), asked directly:
    ``bm25`` of the FTS5 table on SQLite, ``ts_rank`` of ``websearch_to_tsquery`` on
    PostgreSQL."""
    message = Message.objects.get(conversation_id=conversation_id, seq=seq)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT ts_rank(search_vector, websearch_to_tsquery('english', %s), 1) "
                "FROM conversations_message WHERE id = %s",
                [" or ".join(words.split()), message.pk],
            )
        else:
            cursor.execute(
                "SELECT -bm25(conversations_message_fts, 1.0, 0.0) "
                "FROM conversations_message_fts WHERE conversations_message_fts MATCH %s "
                "AND rowid = %s",
                ["content : (" + " OR ".join(words.split()) + ")", message.pk],
            )
        return cursor.fetchone()[0]


def test_full_text_ranks_by_the_databases_own_ranking(owner):
    conversation = conversation_with(
        owner,
        [
            "My locker code is 4821.",
            "Here is the log: " + " ".join(f"code {n} reviewed" for n in range(200)),
            "The lockers at the gym are new.",
            "The weather is fine.",
        ]
        # bm25 gives no weight to a word in half of the messages or more.
        + [f"Small talk number {n}." for n in range(12)],
    )
    found = search.search_messages(conversation_id=conversation.pk, query="locker code", limit=5)
    # The short message with both words first; the paste that repeats one word is held
    # back by its length.
    assert found[0]["seq"] == 1, found
    assert sorted(row["seq"] for row in found) == [1, 2, 3]
    for row in found:
        expected = database_rank(conversation.pk, row["seq"], "locker code")
        assert row["score"] == pytest.approx(expected, abs=1e-4)
    scores = [row["score"] for row in found]
    assert scores == sorted(scores, reverse=True)


def test_a_quoted_phrase_matches_its_words_together(owner):
    conversation = conversation_with(
        owner, ["the blue sky over a red car", "a blue car in the garage", "nothing"]
    )
    assert search.terms('where is the "blue car" by the garage?') == ["blue car", "garage"]
    found = search.search_messages(conversation_id=conversation.pk, query='"blue car"', limit=5)
    assert [row["seq"] for row in found] == [2]


def test_search_without_keywords_finds_nothing(owner):
    conversation = conversation_with(owner, ["what is it"])
    assert search.search_messages(conversation_id=conversation.pk, query="what is", limit=5) == []


def test_search_follows_changed_and_deleted_messages(owner):
    conversation = conversation_with(owner, ["red bicycle", "blue car"])
    Message.objects.filter(conversation=conversation, seq=1).update(content="green tractor")
    assert search.search_messages(conversation_id=conversation.pk, query="bicycle", limit=5) == []
    [row] = search.search_messages(conversation_id=conversation.pk, query="tractor", limit=5)
    assert row["seq"] == 1
    Message.objects.filter(conversation=conversation, seq=1).delete()
    assert search.search_messages(conversation_id=conversation.pk, query="tractor", limit=5) == []


def test_the_database_has_its_full_text_search():
    expected = {"postgresql": "postgresql", "sqlite": "fts5"}[connection.vendor]
    assert search.backend() == expected


def test_the_plain_fallback_finds_the_same_best_match(owner, monkeypatch):
    conversation = conversation_with(
        owner, ["The lockers are new.", "My locker code is 4821.", "Weather."]
    )
    monkeypatch.setattr(search, "backend", lambda: "plain")
    found = search.search_messages(conversation_id=conversation.pk, query="locker code", limit=5)
    assert [row["seq"] for row in found] == [2, 1]


# --- The context builder --------------------------------------------------------------------


def test_a_history_that_fits_goes_in_whole_without_the_history_tools(owner):
    conversation = conversation_with(owner, ["hello", "hi there", "how are you"])
    context = build(conversation, profile(), "fine?")
    assert context.fits
    assert transcript(context) == (
        "System.\n\nUser: hello\nAssistant: hi there\nUser: how are you\nUser: fine?\nAssistant:"
    )
    assert "search_history" not in transcript(context)


def test_the_newest_messages_go_in_and_none_is_split(owner):
    contents = [f"message number {n} " + "padding " * 10 for n in range(200)]
    contents[190] = "huge " * 400  # cannot fit: it stops the window, whole
    conversation = conversation_with(owner, contents)
    context = build(conversation, profile(), "and now?")
    assert not context.fits
    shown = [item.seq for item in context.recent]
    assert shown == list(range(192, 201))  # contiguous, newest, up to the huge one
    assert context.hidden == 191
    assert "huge" not in transcript(context)
    for item in context.recent:
        assert item.line() in transcript(context)
    assert context.used <= context.budget


def test_the_prompt_says_what_is_not_shown_and_offers_the_tools(owner):
    conversation = conversation_with(owner, [f"filler {n} " * 5 for n in range(100)])
    context = build(conversation, profile(), "what now?")
    assert f"({context.hidden} earlier messages are not shown here." in transcript(context)
    assert context.hidden == 100 - len(context.recent)
    assert "- search_history:" in transcript(context)
    assert "- read_history:" in transcript(context)


def test_retrieved_messages_take_their_share_and_are_never_shown_twice(owner):
    conversation = conversation_with(owner, [f"filler {n} " * 5 for n in range(100)])
    agent = profile()
    first = build(conversation, agent, "q")
    old = Item(seq=5, role="user", content="filler 4 " * 5, tokens=tokens.estimate("filler 4 " * 5))
    recent = first.recent[-1]
    context = build(conversation, agent, "q", retrieved=[old, recent])
    assert [item.seq for item in context.retrieved] == [5]
    assert "Earlier in the conversation:\n#5 User: filler 4" in transcript(context)
    assert transcript(context).count(recent.content) == 1
    assert context.used <= context.budget
    assert context.search_before == first.search_before


def test_the_summary_is_used_within_its_share(owner):
    conversation = conversation_with(owner, [f"filler {n} " * 5 for n in range(100)])
    Conversation.objects.filter(pk=conversation.pk).update(
        summary="They talked about fillers.", summary_until_seq=60, summary_tokens=5
    )
    context = build(conversation, profile(), "q")
    assert "Summary of the conversation up to message 60:\nThey talked about fillers." in (
        transcript(context)
    )
    assert context.summary_tokens > 0


def test_a_message_longer_than_the_budget_is_refused_up_front():
    agent = profile()
    assert 0 < message_limit(agent) < agent.prompt_budget - SAFETY_MARGIN


def test_a_transcript_profiles_message_limit_keeps_no_room_for_a_tool_list():
    tools = {"tools": ["search_history", "read_history", "calculator"]}
    transcript = profile(name="base", prompt_style="transcript", **tools)
    chat = profile(name="instruct", prompt_style="chat", **tools)
    listed = tokens.estimate(tools_block(chat)) + BLOCK_COST
    assert message_limit(transcript) == message_limit(chat) + listed


def test_the_cost_of_a_context_does_not_grow_with_the_history(owner):
    agent = profile(context_window=1500, answer_reserve=100)
    small = conversation_with(owner, [f"small {n} talk " * 3 for n in range(150)], scope_id="s")
    large = conversation_with(owner, [f"large {n} talk " * 3 for n in range(15_000)], scope_id="l")
    counts = []
    for conversation in (small, large):
        with CaptureQueriesContext(connection) as queries:
            context = build(conversation, agent, "anything about talk?")
        counts.append(len(queries))
        assert not context.fits
        assert all("LIMIT" in q["sql"] or "COUNT" in q["sql"] for q in queries.captured_queries)
    assert counts[0] == counts[1]


def test_a_retrieved_message_too_long_for_its_share_is_clipped_around_the_question(owner):
    conversation = conversation_with(owner, [f"filler {n} " * 5 for n in range(100)])
    words = ["pad"] * 600
    words[400:403] = ["the", "boiler", "code is 7741"]
    text = " ".join(words)
    long = Item(seq=3, role="user", content=text, tokens=tokens.estimate(text))
    context = build(conversation, profile(), "boiler code?", retrieved=[long], focus=["boiler"])
    [shown] = context.retrieved
    assert shown.seq == 3 and shown.clipped_from == long.tokens
    assert "boiler code is 7741" in shown.content
    assert shown.content.startswith("… pad")
    assert "[message cut: about " in shown.content
    assert 'read_history with {"before_seq": 4, "limit": 1} loads it whole]' in shown.content
    assert shown.line() in transcript(context)
    assert context.used <= context.budget
    assert context.stats()["clipped"] == [
        {"seq": 3, "part": "retrieved", "tokens": long.tokens, "shown_tokens": shown.tokens}
    ]
    stored = Message.objects.get(conversation=conversation, seq=3)
    assert "boiler" not in stored.content  # clipping never touches storage


def test_retrieved_messages_keep_their_room_when_the_recent_ones_are_long(owner):
    paste = " ".join(["lorem"] * 500)
    conversation = conversation_with(owner, ["the gate code is 1234", "ok", paste, paste])
    fact = Item(seq=1, role="user", content="the gate code is 1234", tokens=6)
    context = build(conversation, profile(), "gate code?", retrieved=[fact])
    assert [item.seq for item in context.retrieved] == [1]
    assert context.recent and context.recent[-1].clipped_from  # the newest paste, clipped
    assert context.used <= context.budget


def test_a_transcript_profile_is_shown_the_retrieved_messages_last_before_the_question(owner):
    conversation = conversation_with(owner, [f"filler {n} " * 5 for n in range(100)])
    agent = profile(prompt_style=PromptStyle.TRANSCRIPT, tools=[])
    fact = Item(seq=3, role="user", content="My dog is Pixel.", tokens=6)
    reply = Item(seq=4, role="assistant", content="Nice dog.", tokens=4)
    context = build(conversation, agent, "What is my dog called?", retrieved=[reply, fact])
    assert [item.seq for item in context.retrieved] == [3, 4]
    assert transcript(context).endswith(
        "\n\nEarlier in the conversation:\n#3 User: My dog is Pixel.\n#4 Assistant: Nice dog."
        "\n\nUser: What is my dog called?\nAssistant:"
    )
    assert context.used <= context.budget


def test_a_chat_profile_is_shown_every_retrieved_message_numbered_in_its_system_message(owner):
    from conversations.render import chat_messages

    conversation = conversation_with(owner, [f"filler {n} " * 5 for n in range(100)])
    agent = profile(prompt_style=PromptStyle.CHAT)
    fact = Item(seq=3, role="user", content="My dog is Pixel.", tokens=6)
    reply = Item(seq=4, role="assistant", content="Nice dog.", tokens=4)
    context = build(conversation, agent, "What is my dog called?", retrieved=[fact, reply])
    [system, *_] = chat_messages(context)
    assert system["role"] == "system"
    assert "#3 User: My dog is Pixel.\n#4 Assistant: Nice dog." in system["content"]
