"""The back office in a real browser: Debian's chromium driven by Playwright, against
pytest-django's live server.

Never a browser download: Playwright launches /usr/bin/chromium (``.ci/run`` installs the
``chromium`` package when it is missing). Screenshots go to ``var/screenshots/`` (git-ignored).
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.urls import reverse

from agents import tasks
from agents.models import JobStatus, Step, StepKind
from gateway.models import ApiKey, UsageRecord
from tests.conftest import STAFF_PASSWORD
from tests.factories import InThread, default_profile, make_job, wait_for
from tests.runtime_server import Reply
from tests.test_backoffice import _conversation_with_two_turns

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots"
WIDTH = 1400
# The job list, the page a newcomer opens most, fits a 1,280 px screen.
JOB_LIST_WIDTH = 1280
PLAIN_KEY = re.compile(r"llmgw_[a-z0-9]{12}_[A-Za-z0-9]{40}")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    assert os.path.exists(CHROMIUM), "install Debian's chromium (apt-get install chromium)"
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread while it is open;
    # the tests' own ORM calls (and the database flush between them) are synchronous code.
    unsafe = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if unsafe is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = unsafe


def staff_page(browser, base_url: str) -> tuple:
    """A new browser context and its page, 1,400 px wide, logged in as the superuser through
    the admin's login form at ``base_url``; and the list its errors are gathered in."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "response",
        lambda response: (
            response.status >= 400 and errors.append(f"{response.status} {response.url}")
        ),
    )
    page.set_default_timeout(20_000)
    page.goto(base_url + reverse("admin:login"))
    page.fill("#id_username", "boss")
    page.fill("#id_password", STAFF_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(base_url + reverse("admin:index"))
    return context, page, errors


@pytest.fixture
def page(browser, live_server, superuser, plain_static_storage):
    """A staff member's page, logged in through the admin's login form, 1,400 px wide."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context, page, errors = staff_page(browser, live_server.url)
    yield page
    context.close()
    # No script failed and the Content-Security-Policy refused nothing.
    assert errors == []


def _shot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _open(page, live_server, url: str) -> None:
    page.goto(live_server.url + url)


@pytest.fixture
def own_key(make_key, superuser) -> ApiKey:
    return make_key(name="mine", owner=superuser)[0]


def test_the_dashboard_draws_its_charts(page, live_server, own_key):
    for status, elapsed in ((200, 0.4), (200, 0.9), (200, 1.7), (502, 0.1)):
        UsageRecord.objects.create(
            api_key=own_key,
            model="test-model",
            status=status,
            elapsed=elapsed,
            prompt_tokens=5,
            completion_tokens=7,
        )
    make_job(own_key)
    make_job(own_key, status=JobStatus.FINISHED)

    _open(page, live_server, reverse("admin:index"))
    page.wait_for_function("() => window.Chart && Chart.getChart('chart-jobs')")

    for chart in ("chart-calls", "chart-tokens", "chart-keys", "chart-latency", "chart-jobs"):
        total = page.evaluate(
            """(id) => Chart.getChart(id).data.datasets
                 .flatMap((set) => set.data).reduce((a, b) => a + (b || 0), 0)""",
            chart,
        )
        assert total > 0, chart
        painted = page.evaluate(
            """(id) => {
                 const canvas = document.getElementById(id);
                 const pixels = canvas.getContext('2d')
                   .getImageData(0, 0, canvas.width, canvas.height).data;
                 let n = 0;
                 for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) n++;
                 return n;
               }""",
            chart,
        )
        assert painted > 500, chart
    assert page.inner_text("#queue-depth") == "1"
    _shot(page, "dashboard")


def test_a_running_job_is_cancelled_from_its_page(page, live_server, own_key, runtime):
    runtime.script = lambda prompt, body: Reply(text="word " * 400, chunk_delay=0.1)
    job = make_job(own_key)
    worker = InThread(tasks.run_job, job.pk)
    wait_for(
        lambda: (
            Step.objects.filter(job=job, kind=StepKind.MODEL_CALL).exists()
            and runtime.generate_requests()
        ),
        what="the job's model call",
    )
    _open(page, live_server, reverse("admin:agents_job_change", args=[job.pk]))
    assert page.inner_text(".field-status_colour .job-status") == "running"
    _shot(page, "job-running")

    page.click("#job-cancel")
    page.wait_for_selector("ul.messagelist")
    assert f"Job {job.pk} is cancelling." in page.inner_text("ul.messagelist")
    assert worker.join() == JobStatus.CANCELLED

    page.reload()
    assert page.inner_text(".field-status_colour .job-status") == "cancelled"
    assert page.locator("#job-cancel").count() == 0
    assert page.locator("#step-timeline .step-cancelled").count() == 1
    _shot(page, "job-cancelled")


def test_a_new_key_is_shown_once_and_never_again(page, live_server, superuser):
    _open(page, live_server, reverse("admin:gateway_apikey_add"))
    page.fill("#id_name", "browser-key")
    page.select_option("#id_owner", str(superuser.pk))
    page.click("input[name=_save]")
    page.wait_for_selector("#plain-key")
    plain = page.inner_text("#plain-key")
    assert PLAIN_KEY.fullmatch(plain)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("#copy-key")
    page.wait_for_selector("#copy-done", state="visible")
    assert page.evaluate("() => navigator.clipboard.readText()") == plain
    _shot(page, "key-created")

    api_key = ApiKey.objects.get(name="browser-key")
    for url in (
        reverse("admin:gateway_apikey_changelist"),
        reverse("admin:gateway_apikey_change", args=[api_key.pk]),
    ):
        _open(page, live_server, url)
        assert plain not in page.content()
        assert not PLAIN_KEY.search(page.content())
    _open(page, live_server, reverse("admin:gateway_apikey_changelist"))
    _shot(page, "key-list")


def test_a_transcript_opens_with_its_messages_and_links(page, live_server, own_key):
    conversation, jobs, _ = _conversation_with_two_turns(own_key)
    _open(
        page,
        live_server,
        reverse("admin:conversations_conversation_change", args=[conversation.pk]),
    )

    assert page.locator(".chat-message").count() == 4
    assert "How can I help?" in page.inner_text("#message-2")
    _shot(page, "transcript")
    page.click(f"#message-1 a[href$='{jobs[0].pk}/change/']")
    page.wait_for_selector("#step-timeline")
    assert jobs[0].pk in page.inner_text("#content")


def test_the_playground_answers_through_the_loopback_runtime(page, live_server, own_key, runtime):
    _open(page, live_server, reverse("admin:playground"))
    page.select_option("#id_api_key", str(own_key.pk))
    page.select_option("#id_model", "test-model")
    page.fill("#id_prompt", "The capital of France is")
    page.fill("#id_options", '{"temperature": 0.2, "num_predict": 8}')
    page.click("#playground-send")
    page.wait_for_selector("#playground-answer")

    assert page.inner_text("#playground-answer") == "echo: The capital of France is"
    assert re.search(r"elapsed \d+\.\d{3} s", page.inner_text("#playground-elapsed"))
    assert UsageRecord.objects.filter(api_key=own_key, origin="api", status=200).count() == 1
    _shot(page, "playground")


@pytest.mark.parametrize(
    "model", ["agents_job", "conversations_conversation", "gateway_apikey", "gateway_usagerecord"]
)
def test_the_lists_fit_in_1400_pixels_and_the_job_list_in_1280(page, live_server, own_key, model):
    job = make_job(own_key, status=JobStatus.FAILED, scope_id="a-rather-long-scope-id-" * 3)
    UsageRecord.objects.create(
        api_key=own_key,
        model="a-model-with-a-long-name:latest",
        status=502,
        error="runtime_unavailable",
        elapsed=12.345,
        prompt_tokens=1234,
        completion_tokens=567,
        job_id=job.pk,
        origin="agent",
    )
    _conversation_with_two_turns(own_key)
    limit = JOB_LIST_WIDTH if model == "agents_job" else WIDTH
    page.set_viewport_size({"width": limit, "height": 1000})
    _open(page, live_server, reverse(f"admin:{model}_changelist"))
    _shot(page, f"list-{model}")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= limit, f"{model}: the page is {width} px wide"
    # The admin lets a wide table scroll inside its own box: no column may be cut off.
    table = page.evaluate(
        "() => { const r = document.querySelector('#changelist .results');"
        " return [r.scrollWidth, r.clientWidth]; }"
    )
    assert table[0] <= table[1], f"{model}: the table needs {table[0]} px of {table[1]}"
    if model == "gateway_usagerecord":
        page.click(f"a[href$='{job.pk}/change/']")
        page.wait_for_selector("#step-timeline, .field-timeline")


def test_the_api_docs_try_it_out_starts_a_job_with_the_example_as_it_is(
    page, live_server, make_key, superuser, sync_queue
):
    _, plain = make_key(name="docs", owner=superuser, scopes=("model", "agent"))
    default_profile()  # the example's profile (a flushed database lost the migration's)
    _open(page, live_server, "/api/docs/")
    page.wait_for_selector(".opblock")
    # One error component per status, not one per operation and status.
    schemas = page.locator("section.models .model-container").all_inner_texts()
    assert len([s for s in schemas if s.startswith("Error")]) <= 15
    page.click("button.authorize")
    page.fill(".modal-ux input", plain)
    page.click(".modal-ux .auth-btn-wrapper button.authorize")
    page.click(".modal-ux button.btn-done")
    operation = page.locator(".opblock", has=page.locator("[data-path='/agent/job/start']"))
    operation.locator(".opblock-summary").click()
    body = operation.locator(".body-param__example, .microlight").first.inner_text()
    assert '"profile": "default"' in body and "T-1042" in body
    _shot(page, "api-docs-job-start")
    operation.locator("button.try-out__btn").click()
    operation.locator("button.execute").click()
    live = operation.locator(".live-responses-table tbody .response-col_status")
    live.first.wait_for()
    assert live.first.inner_text().strip().startswith("200")
    answer = operation.locator(".live-responses-table .microlight").first.inner_text()
    assert '"status": "queued"' in answer
    _shot(page, "api-docs-try-it-out")
    operation.locator(".live-responses-table").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "api-docs-try-it-out-answer.png"))


def test_a_failed_tasks_page_shows_what_changed_first_and_folds_the_rest(
    page, live_server, own_key, runtime
):
    runtime.script = lambda prompt, body: ""  # every answer empty: the job fails
    job = make_job(own_key, task="Write a haiku about autumn.")
    assert tasks.run_job(job.pk) == JobStatus.FAILED
    _open(page, live_server, reverse("admin:agents_job_change", args=[job.pk]))
    page.wait_for_selector("#step-timeline")
    assert page.locator("input[name=_save]").count() == 0
    first = page.locator(".timeline > li").first
    assert first.locator(".prompt-new").first.inner_text() == job.task
    # the profile's system text is folded in every call, shown in none
    folds = page.locator("details.prompt-fold:not([open])")
    assert folds.count() >= job.profile.max_steps
    assert not page.get_by_text("Below is a task", exact=False).first.is_visible()
    later = page.locator(".timeline > li").nth(2)
    assert "new since step #" in later.inner_text()
    _shot(page, "job-failed-task")
