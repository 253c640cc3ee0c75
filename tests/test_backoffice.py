"""The back office pages: dashboard, jobs, transcript, playground, and the admin's error pages."""

import re
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Job, JobKind, JobStatus, Step, StepKind, StepStatus
from conversations.models import Conversation, Message
from gateway.models import ApiKey, UsageRecord
from tests.factories import default_profile, make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_key(make_key, superuser):
    return make_key(name="mine", owner=superuser)[0]


def _step(job: Job, index: int, **fields) -> Step:
    now = timezone.now()
    values = {
        "kind": StepKind.MODEL_CALL,
        "name": "generate",
        "status": StepStatus.FINISHED,
        "started_at": now,
        "finished_at": now,
        "elapsed": 1.25,
        **fields,
    }
    return Step.objects.create(job=job, index=index, **values)


# --- Dashboard ----------------------------------------------------------------------------


def test_the_admin_index_carries_the_dashboard_data_and_its_static_scripts(staff_client, own_key):
    UsageRecord.objects.create(api_key=own_key, model="test-model", status=200, elapsed=0.4)
    UsageRecord.objects.create(
        api_key=own_key, model="test-model", status=502, error="runtime_error", elapsed=0.1
    )
    make_job(own_key)

    page = staff_client.get(reverse("admin:index"))

    assert page.status_code == 200
    html = page.content.decode()
    assert '<script id="dashboard-data" type="application/json">' in html
    assert "backoffice/vendor/chartjs/chart.umd.min.js" in html
    assert "backoffice/dashboard.js" in html
    assert "<script>" not in html  # no inline code: only static files and JSON data
    data = page.context["dashboard"]
    assert data["usage"]["calls"][-1] == 2 and data["usage"]["errors"][-1] == 1
    assert data["queue"]["depth"] == 1
    assert 'id="queue-depth">1<' in html


# --- Jobs ---------------------------------------------------------------------------------


def test_the_job_list_shows_status_in_colour_model_key_steps_and_duration(staff_client, own_key):
    job = make_job(own_key, status=JobStatus.FAILED, error="boom")
    Job.objects.filter(pk=job.pk).update(started_at=job.finished_at - timedelta(seconds=12.5))
    _step(job, 0)
    _step(job, 1)

    html = staff_client.get(reverse("admin:agents_job_changelist")).content.decode()

    assert '<span class="job-status job-status-failed">failed</span>' in html
    assert "12.5 s" in html
    assert '<td class="field-step_count">2</td>' in html
    assert default_profile().model in html and "mine" in html
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", html)  # times to the second


def test_a_job_page_shows_its_steps_as_a_readable_timeline(staff_client, own_key):
    job = make_job(own_key, status=JobStatus.FINISHED, final_result={"text": "Bonjour"})
    _step(job, 0, kind=StepKind.CONTEXT, name="build_context", output={"window_start": 1})
    _step(
        job,
        1,
        input={"prompt": "Line one\nLine two", "options": {"temperature": 0.2}},
        output={"text": "Réponse"},
    )

    page = staff_client.get(reverse("admin:agents_job_change", args=[job.pk]))

    html = page.content.decode()
    assert 'id="step-timeline"' in html
    assert "build_context" in html and "1.2 s" in html
    assert '<pre class="readable-text">Line one\nLine two</pre>' in html
    assert "\\n" not in html.split('id="step-timeline"')[1]
    assert '<pre class="readable-json">{\n  &quot;temperature&quot;: 0.2\n}</pre>' in html
    assert "Réponse" in html
    assert 'id="job-cancel"' not in html  # a finished job has no Cancel button


@pytest.mark.parametrize(
    ("status", "after"),
    [(JobStatus.QUEUED, JobStatus.CANCELLED), (JobStatus.RUNNING, JobStatus.CANCELLING)],
)
def test_the_cancel_button_cancels_through_the_api_service(staff_client, own_key, status, after):
    job = make_job(own_key, status=status)
    page = staff_client.get(reverse("admin:agents_job_change", args=[job.pk]))
    assert b'id="job-cancel"' in page.content

    # The admin quotes ids in its URLs ("_" becomes "_5F"): the button's URL is taken as is.
    response = staff_client.post(
        reverse("admin:agents_job_cancel", args=[quote(job.pk)]), follow=True
    )

    job.refresh_from_db()
    assert job.status == after
    assert [str(m) for m in response.context["messages"]] == [f"Job {job.pk} is {after}."]


def test_cancelling_a_finished_job_from_its_page_says_why_not(staff_client, own_key):
    job = make_job(own_key, status=JobStatus.FINISHED)
    url = reverse("admin:agents_job_cancel", args=[job.pk])
    assert staff_client.get(url).status_code == 405
    response = staff_client.post(url, follow=True)
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    [message] = response.context["messages"]
    assert "cannot be cancelled" in str(message)


# --- Conversations ------------------------------------------------------------------------


def _conversation_with_two_turns(api_key) -> tuple[Conversation, list[Job], list[Step]]:
    conversation = Conversation.objects.create(
        owner_id=api_key.owner_id,
        source="tests",
        scope_type="ticket",
        scope_id="T-9",
        profile=default_profile(),
    )
    jobs, steps = [], []
    texts = ["Hello <b>there</b>", "Hi!\nHow can I help?", "Second question", "Second answer"]
    for turn in range(2):
        job = make_job(
            api_key, kind=JobKind.CHAT, conversation=conversation, status=JobStatus.FINISHED
        )
        own_seq = 2 * turn + 1
        window = {"window_start": 1 if turn else None, "retrieved_seqs": []}
        steps.append(_step(job, 0, kind=StepKind.CONTEXT, name="build_context", output=window))
        for offset, role in enumerate(("user", "assistant")):
            Message.objects.create(
                conversation=conversation,
                seq=own_seq + offset,
                role=role,
                content=texts[own_seq + offset - 1],
                job=job,
            )
        jobs.append(job)
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=4, message_count=4)
    conversation.refresh_from_db()
    return conversation, jobs, steps


def test_the_transcript_is_chat_style_with_jobs_and_context_steps_one_click_away(
    staff_client, own_key
):
    conversation, jobs, steps = _conversation_with_two_turns(own_key)

    page = staff_client.get(
        reverse("admin:conversations_conversation_change", args=[conversation.pk])
    )

    html = page.content.decode()
    assert html.count('class="chat-message role-user"') == 2
    assert html.count('class="chat-message role-assistant"') == 2
    assert "Hello &lt;b&gt;there&lt;/b&gt;" in html  # escaped, never rendered
    assert "Hi!\nHow can I help?" in html
    for job in jobs:
        assert reverse("admin:agents_job_change", args=[job.pk]) in html
    # The second turn's context showed messages 1 and 2: each links that step.
    second_context = reverse("admin:agents_step_change", args=[steps[1].pk])
    message_1 = html.split('id="message-1"')[1].split('id="message-2"')[0]
    message_3 = html.split('id="message-3"')[1]
    assert second_context in message_1
    assert second_context not in message_3


def test_jobs_steps_messages_and_usage_records_are_pages_without_save(staff_client, own_key):
    conversation, jobs, steps = _conversation_with_two_turns(own_key)
    usage = UsageRecord.objects.create(
        api_key=own_key, model="test-model", status=200, elapsed=0.4, job_id=jobs[0].pk
    )
    message = Message.objects.filter(conversation=conversation).first()
    running = make_job(own_key, status=JobStatus.RUNNING, lease_owner="w")
    pages = [
        reverse("admin:agents_job_change", args=[quote(jobs[0].pk)]),
        reverse("admin:agents_job_change", args=[quote(running.pk)]),
        reverse("admin:agents_step_change", args=[steps[0].pk]),
        reverse("admin:conversations_message_change", args=[message.pk]),
        reverse("admin:gateway_usagerecord_change", args=[usage.pk]),
    ]
    for url in pages:
        html = staff_client.get(url).content.decode()
        assert 'name="_save"' not in html, url
        assert 'name="_continue"' not in html, url
    running_page = staff_client.get(pages[1]).content.decode()
    assert "cancel/" in running_page  # a running job still has its Cancel button


# --- Playground ---------------------------------------------------------------------------


def test_the_playground_lists_the_runtime_models_and_only_the_members_own_keys(
    staff_client, own_key, make_key, runtime
):
    make_key(name="someone-elses")
    page = staff_client.get(reverse("admin:playground"))
    form = page.context["form"]
    assert [choice for choice, _ in form.fields["model"].choices] == sorted(runtime.models)
    assert list(form.fields["api_key"].queryset) == [own_key]


def test_the_playground_calls_the_model_like_api_php_and_records_usage(
    staff_client, own_key, runtime
):
    response = staff_client.post(
        reverse("admin:playground"),
        {
            "api_key": own_key.pk,
            "model": "test-model",
            "prompt": "Say hi\nplease",
            "options": '{"temperature": 0.1}',
        },
    )

    assert response.status_code == 200
    assert response.context["result"].response == "echo: Say hi\nplease"
    html = response.content.decode()
    assert 'id="playground-answer">echo: Say hi\nplease<' in html
    assert re.search(r"elapsed <strong>\d+\.\d{3} s</strong>", html)
    [sent] = runtime.generate_requests()
    assert sent.body["prompt"] == "Say hi\nplease"
    assert sent.body["options"]["temperature"] == 0.1
    [record] = UsageRecord.objects.all()
    assert (record.api_key_id, record.origin, record.status) == (own_key.pk, "api", 200)


def test_the_playground_applies_the_keys_model_permission(
    staff_client, make_key, superuser, runtime
):
    limited, _ = make_key(name="limited", owner=superuser, allowed_models=["other-model"])
    response = staff_client.post(
        reverse("admin:playground"),
        {"api_key": limited.pk, "model": "test-model", "prompt": "hi", "options": ""},
    )
    assert response.context["error"] == "model_not_allowed"
    assert b'id="playground-error"' in response.content
    assert runtime.generate_requests() == []


def test_a_staff_member_without_a_key_runs_the_playground_as_themselves(
    staff_client, superuser, runtime
):
    assert not ApiKey.objects.exists()
    page = staff_client.get(reverse("admin:playground"))
    assert b"You have no live key" not in page.content
    for _ in range(2):
        response = staff_client.post(
            reverse("admin:playground"),
            {"api_key": "", "model": "test-model", "prompt": "hi", "options": ""},
        )
        assert response.context["result"].response == "echo: hi"
    [key] = ApiKey.objects.all()  # made once, then used again
    assert (key.owner, key.name, key.scopes) == (superuser, "playground", ["model"])
    assert key.expires_at is not None
    assert UsageRecord.objects.filter(api_key=key, status=200).count() == 2


def test_a_playground_error_reads_as_sentences(staff_client, own_key, runtime):
    response = staff_client.post(
        reverse("admin:playground"),
        {
            "api_key": own_key.pk,
            "model": "test-model",
            "prompt": "hi",
            "options": '{"temperature": -1}',
        },
    )
    assert response.context["error"] == "validation_error"
    [problem] = response.context["problems"]
    assert problem.startswith("options.temperature: ") and problem.endswith(".")
    html = response.content.decode()
    assert "ErrorDetail" not in html and "{'" not in html
    assert problem in html
    assert runtime.generate_requests() == []


def test_the_playground_refuses_options_that_are_not_a_json_object(staff_client, own_key, runtime):
    response = staff_client.post(
        reverse("admin:playground"),
        {"api_key": own_key.pk, "model": "test-model", "prompt": "hi", "options": "[1]"},
    )
    assert response.context["form"].errors["options"] == ["Options must be a JSON object."]
    assert runtime.generate_requests() == []


# --- Error pages --------------------------------------------------------------------------


def test_a_csrf_failure_in_the_admin_is_an_html_page(superuser):
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("admin:login"), {"username": "boss", "password": "x"})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    assert b"The form has expired" in response.content


def test_a_server_error_in_the_admin_is_an_html_page_and_the_api_keeps_json(rf):
    from core import errors

    admin_page = errors.handler500(rf.get("/admin/agents/job/"))
    assert admin_page.status_code == 500
    assert admin_page["Content-Type"].startswith("text/html")
    assert b"Server error" in admin_page.content
    api = errors.handler500(rf.post("/api.php"))
    assert api["Content-Type"] == "application/json"
