"""The admin's live pages in a real browser: Debian's chromium (Playwright) on the production
request path (uvicorn serving config.asgi, static files from the apps as the live server
serves them), a real cluster running the chat. A job's page and its conversation's
transcript show the steps, the tokens and the reply as they happen, without a reload.
Screenshots go to ``var/screenshots/``."""

from collections.abc import Iterator

import httpx
import pytest
from django.urls import reverse

from tests.factories import default_profile, wait_for
from tests.runtime_server import Reply
from tests.test_browser import SCREENSHOTS, browser, staff_page  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WORDS = 24


@pytest.fixture
def staff_server(runtime, unused_port, transactional_db, superuser, plain_static_storage):
    """uvicorn serving config.asgi with the apps' static files, in a thread of this process."""
    import threading

    import uvicorn
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from config.asgi import application

    server = uvicorn.Server(
        uvicorn.Config(
            ASGIStaticFilesHandler(application),
            host="127.0.0.1",
            port=unused_port,
            lifespan="off",
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, what="uvicorn to start")
    yield f"http://127.0.0.1:{unused_port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def pages(browser, staff_server) -> Iterator:  # noqa: F811
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    opened = []

    def open_page():
        context, page, errors = staff_page(browser, staff_server)
        opened.append((context, errors))
        return page

    yield open_page
    for context, errors in opened:
        context.close()
        # No script failed, the Content-Security-Policy refused nothing, no answer was an error.
        assert errors == []


def test_a_chats_job_page_and_transcript_follow_it_live(
    pages, staff_server, make_key, superuser, start_cluster, runtime
):
    default_profile()
    _, plain = make_key(name="mine", owner=superuser)
    text = " ".join(f"Word{n} here." for n in range(WORDS))
    runtime.script = lambda prompt, body: Reply(text=text, chunk_delay=0.25)
    started = httpx.post(
        f"{staff_server}/agent/chat",
        json={"source": "web", "scope_type": "user", "scope_id": "live", "prompt": "talk to me"},
        headers={"Authorization": f"Bearer {plain}"},
    ).json()["data"]

    job_page = pages()
    job_page.goto(staff_server + reverse("admin:agents_job_change", args=[started["job_id"]]))
    assert job_page.inner_text(".field-status_colour .job-status") == "queued"
    assert job_page.locator("#step-timeline li").count() == 0
    transcript = pages()
    transcript.goto(
        staff_server
        + reverse("admin:conversations_conversation_change", args=[started["conversation_id"]])
    )
    assert transcript.locator(".chat-message").count() == 1
    for page in (job_page, transcript):  # a reload would lose this mark
        page.evaluate("() => { window.notReloaded = true; }")

    start_cluster()
    # The steps appear, then the model call's tokens, a few at a time.
    job_page.wait_for_selector("#step-timeline li")
    job_page.wait_for_function(
        "() => [...document.querySelectorAll('.step-tokens')]"
        ".some((box) => box.textContent.includes('Word2'))"
    )
    shown = job_page.inner_text(".step-tokens")
    assert shown.startswith("Word0 here. Word1 here.") and f"Word{WORDS - 1}" not in shown
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    job_page.screenshot(path=str(SCREENSHOTS / "job-live-tokens.png"), full_page=True)
    transcript.wait_for_selector("#live-reply")
    transcript.wait_for_function(
        "() => document.querySelector('#live-reply .chat-content').textContent.includes('Word3')"
    )
    transcript.screenshot(path=str(SCREENSHOTS / "transcript-live-reply.png"), full_page=True)

    # The end: the job's status, the stored reply in the transcript, still the same pages.
    job_page.wait_for_function(
        "() => document.querySelector('.field-status_colour .job-status')"
        ".textContent === 'finished'",
        timeout=60_000,
    )
    assert job_page.inner_text(".step-tokens").strip() == text
    transcript.wait_for_selector(".chat-message.role-assistant:not(.live-reply)", timeout=60_000)
    assert transcript.locator("#live-reply").count() == 0
    assert transcript.inner_text(".chat-message.role-assistant .chat-content") == text
    for page in (job_page, transcript):
        assert page.evaluate("() => window.notReloaded") is True
    job_page.screenshot(path=str(SCREENSHOTS / "job-live-finished.png"), full_page=True)
    transcript.screenshot(path=str(SCREENSHOTS / "transcript-live-finished.png"), full_page=True)
