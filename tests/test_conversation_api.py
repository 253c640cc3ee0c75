"""GET /agent/conversation/{id}, the error envelopes of the chat endpoints, owners kept
apart, and the conversation admin."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import AgentProfile, Job
from conversations import services
from conversations.models import Conversation, Message
from tests.envelope import assert_error

pytestmark = pytest.mark.django_db

SCOPE = {"source": "web", "scope_type": "ticket", "scope_id": "42"}


def conversation_of(owner, size: int, **scope) -> Conversation:
    conversation = services.conversation_get_or_create(
        owner_id=owner.pk,
        **{**SCOPE, **scope},
        profile=AgentProfile.objects.get(name="default"),
    )
    services.messages_import(
        conversation=conversation,
        messages=(("user" if n % 2 else "assistant", f"message {n}") for n in range(1, size + 1)),
    )
    return conversation


@pytest.fixture
def owner(agent_client):
    return get_user_model().objects.get(username="tester")


def client_for(plain: str, header: str = "bearer") -> APIClient:
    client = APIClient()
    if header == "bearer":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plain}")
    else:
        client.credentials(HTTP_X_API_KEY=plain)
    return client


# --- Reading a conversation ----------------------------------------------------------------


def test_a_conversation_is_read_back_in_order(agent_client, owner):
    conversation = conversation_of(owner, 5)
    response = agent_client.get(f"/agent/conversation/{conversation.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    data = body["data"]
    assert data["conversation_id"] == conversation.pk
    assert [m["content"] for m in data["messages"]] == [f"message {n}" for n in range(1, 6)]
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"] * 2 + ["user"]
    assert [m["seq"] for m in data["messages"]] == [1, 2, 3, 4, 5]
    assert all(m["created_at"].endswith("+00:00") for m in data["messages"])
    assert data["has_more"] is False


def test_the_x_api_key_header_reads_a_conversation_too(make_key):
    key, plain = make_key(name="other-header")
    conversation = conversation_of(key.owner, 2)
    response = client_for(plain, header="x-api-key").get(f"/agent/conversation/{conversation.pk}")
    assert response.status_code == 200


def test_limit_returns_the_newest_page_and_before_walks_back(agent_client, owner):
    conversation = conversation_of(owner, 25)
    url = f"/agent/conversation/{conversation.pk}"
    page = agent_client.get(url, {"limit": 10}).json()["data"]
    assert [m["seq"] for m in page["messages"]] == list(range(16, 26))
    assert page["has_more"] is True
    seen = page["messages"]
    while page["has_more"]:
        page = agent_client.get(url, {"limit": 10, "before": seen[0]["seq"]}).json()["data"]
        seen = page["messages"] + seen
    assert [m["seq"] for m in seen] == list(range(1, 26))


def test_before_without_limit_returns_everything_older(agent_client, owner):
    conversation = conversation_of(owner, 8)
    data = agent_client.get(f"/agent/conversation/{conversation.pk}", {"before": 4}).json()
    assert [m["seq"] for m in data["data"]["messages"]] == [1, 2, 3]


def test_an_empty_page_is_not_an_error(agent_client, owner):
    conversation = conversation_of(owner, 3)
    data = agent_client.get(f"/agent/conversation/{conversation.pk}", {"before": 1}).json()
    assert data["data"]["messages"] == []
    assert data["data"]["has_more"] is False


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "-3"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "2.5"}, "limit"),
        ({"before": "0"}, "before"),
        ({"before": "x"}, "before"),
        ({"limit": "", "before": "3"}, "limit"),
        ({"before": ""}, "before"),
    ],
)
def test_bad_paging_values_are_a_validation_error(agent_client, owner, params, field):
    conversation = conversation_of(owner, 3)
    response = agent_client.get(f"/agent/conversation/{conversation.pk}", params)
    body = assert_error(response, 400, "validation_error")
    assert list(body["details"]["fields"]) == [field]


def test_an_unknown_conversation_is_not_found(agent_client):
    response = agent_client.get("/agent/conversation/conv_nope")
    body = assert_error(response, 404, "conversation_not_found")
    assert body["details"] == {"conversation_id": "conv_nope"}


def test_another_owners_conversation_is_not_found_either(agent_client, make_key):
    stranger, _ = make_key(name="stranger")
    theirs = conversation_of(stranger.owner, 3)
    unknown = agent_client.get("/agent/conversation/conv_nope").json()
    response = agent_client.get(f"/agent/conversation/{theirs.pk}")
    body = assert_error(response, 404, "conversation_not_found")
    assert body["message"] == unknown["message"]  # the same answer: nothing leaks


def test_two_keys_of_one_owner_share_their_conversations(make_key):
    first, first_plain = make_key(name="first")
    _, second_plain = make_key(name="second", owner=first.owner)
    conversation_id = (
        client_for(first_plain)
        .post("/agent/chat", {**SCOPE, "prompt": "hi"}, format="json")
        .json()["data"]["conversation_id"]
    )
    response = client_for(second_plain).get(f"/agent/conversation/{conversation_id}")
    assert response.status_code == 200
    again = client_for(second_plain).post(
        "/agent/chat", {**SCOPE, "prompt": "again"}, format="json"
    )
    assert again.json()["data"]["conversation_id"] == conversation_id


def test_owners_with_the_same_scope_have_separate_conversations(make_key, runtime):
    _, alice = make_key(name="alice")
    _, bob = make_key(name="bob")
    a = client_for(alice).post("/agent/chat", {**SCOPE, "prompt": "alice's secret"}, format="json")
    b = client_for(bob).post("/agent/chat", {**SCOPE, "prompt": "bob's question"}, format="json")
    a_id, b_id = a.json()["data"]["conversation_id"], b.json()["data"]["conversation_id"]
    assert a_id != b_id
    bob_reads = client_for(bob).get(f"/agent/conversation/{b_id}").json()["data"]["messages"]
    assert [m["content"] for m in bob_reads] == ["bob's question"]
    assert client_for(bob).get(f"/agent/conversation/{a_id}").status_code == 404


def test_a_chat_never_shows_another_owners_history_to_the_model(
    make_key, runtime, sync_queue, django_capture_on_commit_callbacks
):
    _, alice = make_key(name="alice")
    _, bob = make_key(name="bob")
    runtime.script = lambda prompt, body: "ok"
    with django_capture_on_commit_callbacks(execute=True):
        client_for(alice).post("/agent/chat", {**SCOPE, "prompt": "alice secret"}, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        client_for(bob).post("/agent/chat", {**SCOPE, "prompt": "what do you know"}, format="json")
    assert "alice secret" not in runtime.prompts()[-1]


def test_a_large_conversation_is_read_in_full(agent_client, owner):
    conversation = conversation_of(owner, 10_000)
    data = agent_client.get(f"/agent/conversation/{conversation.pk}").json()["data"]
    assert len(data["messages"]) == 10_000
    assert data["messages"][-1]["seq"] == 10_000


# --- Error envelopes of the chat endpoints ---------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"source", "scope_type", "scope_id", "prompt"}),
        ({**SCOPE}, {"prompt"}),
        ({**SCOPE, "prompt": ""}, {"prompt"}),
        ({**SCOPE, "prompt": 5}, {"prompt"}),
        ({**SCOPE, "prompt": None}, {"prompt"}),
        ({**SCOPE, "prompt": ["hi"]}, {"prompt"}),
        ({**SCOPE, "scope_id": True, "prompt": "hi"}, {"scope_id"}),
        ({**SCOPE, "scope_id": 1.5, "prompt": "hi"}, {"scope_id"}),
        ({**SCOPE, "scope_id": "", "prompt": "hi"}, {"scope_id"}),
        ({**SCOPE, "source": 7, "prompt": "hi"}, {"source"}),
        ({**SCOPE, "scope_type": {}, "prompt": "hi"}, {"scope_type"}),
        ({**SCOPE, "prompt": "hi", "profile": 3}, {"profile"}),
        ({**SCOPE, "prompt": "hi", "model": "x"}, {"model"}),
        ({**SCOPE, "prompt": "hi", "history": []}, {"history"}),
    ],
)
def test_a_bad_chat_request_is_a_validation_error(agent_client, body, fields):
    response = agent_client.post("/agent/chat", body, format="json")
    error = assert_error(response, 400, "validation_error")
    assert set(error["details"]["fields"]) == fields
    assert not Job.objects.exists() and not Conversation.objects.exists()


def test_an_unknown_profile_is_refused(agent_client):
    response = agent_client.post(
        "/agent/chat", {**SCOPE, "prompt": "hi", "profile": "nope"}, format="json"
    )
    body = assert_error(response, 400, "unknown_profile")
    assert body["details"] == {"profile": "nope"}
    assert not Conversation.objects.exists()


def test_a_body_that_is_not_json_is_refused(agent_client):
    response = agent_client.post("/agent/chat", "{nope", content_type="application/json")
    assert_error(response, 400, "invalid_json")


def test_a_body_that_is_not_an_object_is_refused(agent_client):
    response = agent_client.post("/agent/chat", [1, 2], format="json")
    assert_error(response, 400, "validation_error")


def test_a_form_body_is_refused(agent_client):
    response = agent_client.post("/agent/chat", {**SCOPE, "prompt": "hi"})  # multipart
    assert_error(response, 415, "unsupported_media_type")


def test_a_chat_needs_a_key(client):
    response = client.post(
        "/agent/chat", {**SCOPE, "prompt": "hi"}, content_type="application/json"
    )
    assert_error(response, 401, "invalid_api_key")


def test_a_revoked_key_cannot_read_a_conversation(make_key):
    from gateway.services import api_key_revoke

    key, plain = make_key(name="gone")
    conversation = conversation_of(key.owner, 1)
    api_key_revoke(api_key=key)
    response = client_for(plain).get(f"/agent/conversation/{conversation.pk}")
    assert_error(response, 401, "invalid_api_key")


def test_a_key_without_the_agent_scope_is_forbidden(make_key):
    key, plain = make_key(name="model-only", scopes=("model",))
    conversation = conversation_of(key.owner, 1)
    assert_error(
        client_for(plain).post("/agent/chat", {**SCOPE, "prompt": "hi"}, format="json"),
        403,
        "forbidden",
    )
    assert_error(client_for(plain).get(f"/agent/conversation/{conversation.pk}"), 403, "forbidden")


def test_wrong_methods_are_refused_with_the_envelope(agent_client, owner):
    conversation = conversation_of(owner, 1)
    response = agent_client.get("/agent/chat")
    assert_error(response, 405, "method_not_allowed")
    response = agent_client.delete(f"/agent/conversation/{conversation.pk}")
    assert_error(response, 405, "method_not_allowed")


def test_a_wrong_method_is_refused_before_the_key_is_checked(client):
    assert_error(client.get("/agent/chat"), 405, "method_not_allowed")


# --- Admin --------------------------------------------------------------------------------


@pytest.fixture
def staff_client(client, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    user = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client


def test_the_admin_shows_a_readable_transcript_with_links_to_the_jobs(
    staff_client, agent_client, runtime
):
    data = agent_client.post(
        "/agent/chat", {**SCOPE, "prompt": "<b>bold</b> question"}, format="json"
    ).json()["data"]
    url = reverse("admin:conversations_conversation_change", args=[data["conversation_id"]])
    page = staff_client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "#1 user" in html
    assert "&lt;b&gt;bold&lt;/b&gt; question" in html  # escaped, never rendered
    assert reverse("admin:agents_job_change", args=[data["job_id"]]) in html
    assert page.context["has_change_permission"] is False

    jobs = staff_client.get(
        reverse("admin:agents_job_changelist"), {"conversation": data["conversation_id"]}
    )
    assert jobs.status_code == 200
    assert data["job_id"] in jobs.content.decode()


def test_the_admin_lists_the_messages_of_a_conversation(staff_client, owner, agent_client):
    conversation = conversation_of(owner, 300)
    other = conversation_of(owner, 3, scope_id="other")
    page = staff_client.get(
        reverse("admin:conversations_message_changelist"),
        {"conversation__id__exact": conversation.pk},
    )
    assert page.status_code == 200
    assert page.context["cl"].queryset.count() == 300
    assert other.pk not in page.content.decode()
    change = staff_client.get(reverse("admin:conversations_conversation_change", args=[other.pk]))
    assert "All 3 messages." in change.content.decode()
    big = staff_client.get(
        reverse("admin:conversations_conversation_change", args=[conversation.pk])
    )
    assert "The last 200 of 300 messages." in big.content.decode()


def test_conversations_and_messages_cannot_be_added_in_the_admin(staff_client):
    assert staff_client.get(reverse("admin:conversations_conversation_add")).status_code == 403
    assert staff_client.get(reverse("admin:conversations_message_add")).status_code == 403


def test_the_admin_searches_conversations(staff_client, owner):
    conversation_of(owner, 1, scope_id="findme-123")
    page = staff_client.get(reverse("admin:conversations_conversation_changelist"), {"q": "findme"})
    assert page.status_code == 200
    assert page.context["cl"].result_count == 1


def test_messages_are_deleted_with_their_conversation(owner):
    conversation = conversation_of(owner, 4)
    conversation.delete()
    assert not Message.objects.exists()
