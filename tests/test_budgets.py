"""Token budgets per key and period (gateway.budgets), and usage_report."""

import io
import json
import math
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from gateway import budgets
from gateway.models import ApiKey, BudgetWindow, UsageRecord
from tests.envelope import assert_error
from tests.live import request
from tests.runtime_server import Reply
from tests.test_jobs_api import BODY, START, post_json

pytestmark = pytest.mark.django_db

# The loopback runtime counts a prompt's words, and the reply's words, as tokens.
PROMPT = "one two three"  # 3 prompt tokens
REPLY = "four five"  # 2 completion tokens: 5 a call


def call(client, plain: str):
    return client.post(
        "/api.php",
        {"api_key": plain, "model": "test-model", "prompt": PROMPT},
        content_type="application/json",
    )


def test_create_api_key_sets_a_token_budget_and_its_period():
    out = io.StringIO()
    call_command(
        "create_api_key", "--name=capped", "--token-budget=5000", "--budget-period=day", stdout=out
    )
    key = ApiKey.objects.get(name="capped")
    assert (key.token_budget, key.budget_period) == (5000, "day")
    call_command("create_api_key", "--name=open", stdout=io.StringIO())
    assert ApiKey.objects.get(name="open").token_budget is None
    with pytest.raises(CommandError):
        call_command("create_api_key", "--name=bad", "--token-budget=-1", stdout=io.StringIO())


def test_calls_are_refused_once_the_periods_tokens_reach_the_budget(client, runtime, make_key):
    runtime.script = lambda prompt, body: REPLY
    _, plain = make_key(name="capped", token_budget=10, budget_period="day")
    assert call(client, plain).status_code == 200
    assert call(client, plain).status_code == 200
    refused = call(client, plain)
    body = assert_error(refused, 429, "budget_exceeded")
    tomorrow = (timezone.now() + timedelta(days=1)).astimezone(UTC).date()
    assert body["details"]["reset_at"] == f"{tomorrow.isoformat()}T00:00:00Z"
    assert body["details"]["token_budget"] == 10 and body["details"]["tokens_spent"] == 10
    reset_at = datetime.fromisoformat(body["details"]["reset_at"])
    wait = int(refused["Retry-After"])
    assert abs(wait - math.ceil((reset_at - timezone.now()).total_seconds())) <= 2
    assert len(runtime.generate_requests()) == 2  # the refused call never reached it


def test_the_budget_counts_every_face_and_refuses_agent_starts_too(
    client, agent_client, runtime, api_key
):
    key = ApiKey.objects.get(prefix=api_key.split("_")[1])
    key.token_budget, key.budget_period = 5, "month"
    key.save()
    runtime.script = lambda prompt, body: REPLY
    assert call(client, api_key).status_code == 200
    refused = post_json(agent_client, START, BODY)
    body = assert_error(refused, 429, "budget_exceeded")
    assert body["details"]["reset_at"].endswith("-01T00:00:00Z")


def test_a_budget_set_mid_period_counts_what_was_spent_before_and_the_period_turns(
    client, runtime, make_key
):
    runtime.script = lambda prompt, body: REPLY
    key, plain = make_key(name="late")
    for _ in range(3):
        assert call(client, plain).status_code == 200
    key.token_budget, key.budget_period = 15, "day"
    key.save()
    assert_error(call(client, plain), 429, "budget_exceeded")
    assert budgets.budget_spent(key) == 15
    tomorrow = timezone.now() + timedelta(days=1)
    budgets.budget_check(key, now=tomorrow)  # a new day: nothing spent yet


def test_periods_start_at_midnight_and_on_the_first_of_the_month_in_utc():
    moment = datetime(2026, 12, 31, 23, 30, tzinfo=UTC)
    assert budgets.period_bounds("day", moment) == (
        datetime(2026, 12, 31, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert budgets.period_bounds("month", moment) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_budget_holds_under_concurrency_up_to_the_calls_already_in_flight(
    start_web, runtime, make_key
):
    """Eight clients call until refused, through two web processes: every call admitted
    while the budget had room finishes, none after it is spent."""
    runtime.script = lambda prompt, body: Reply(text=REPLY, delay=0.05)
    key, plain = make_key(name="shared", token_budget=5 * 20, budget_period="day")
    web = start_web(WEB_CONCURRENCY="2")
    clients = 8
    outcomes: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        while True:
            status, body = request(
                web.url,
                "POST",
                "/api.php",
                {"api_key": plain, "model": "test-model", "prompt": PROMPT},
            )
            with lock:
                outcomes.append(status)
            if status != 200:
                assert (status, body["error"]) == (429, "budget_exceeded")
                return

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    ok = outcomes.count(200)
    assert outcomes.count(429) == clients
    # 20 calls fit; at most the other clients' calls in flight when it filled overshoot.
    assert 20 <= ok <= 20 + clients - 1, ok
    recorded = UsageRecord.objects.filter(api_key=key, status=200).count()
    assert recorded == ok
    [window] = BudgetWindow.objects.filter(api_key=key)
    assert window.tokens == 5 * ok


def make_records(key, rows):
    now = timezone.now()
    for model, status, prompt, completion, age in rows:
        record = UsageRecord.objects.create(
            api_key=key,
            model=model,
            status=status,
            prompt_tokens=prompt,
            completion_tokens=completion,
            elapsed=0.1,
            prompt_chars=1,
            response_chars=1,
        )
        UsageRecord.objects.filter(pk=record.pk).update(created_at=now - age)


def test_usage_report_sums_calls_errors_and_tokens_by_key_model_or_day(make_key):
    alice, _ = make_key(name="alice")
    bob, _ = make_key(name="bob")
    make_records(
        alice,
        [
            ("m1", 200, 10, 5, timedelta(hours=1)),
            ("m2", 502, 3, None, timedelta(days=1, hours=1)),
            ("m1", 200, 100, 100, timedelta(days=9)),
        ],
    )
    make_records(bob, [("m1", 200, 1, 1, timedelta(hours=2))])

    out = io.StringIO()
    call_command("usage_report", "--since=7d", "--format=json", stdout=out)
    rows = json.loads(out.getvalue())["rows"]
    assert [(r["key"].split(" ")[0], r["calls"], r["errors"], r["tokens"]) for r in rows] == [
        ("alice", 2, 1, 18),
        ("bob", 1, 0, 2),
    ]
    out = io.StringIO()
    call_command("usage_report", "--since=7d", "--by=model", "--format=csv", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "model,calls,errors,prompt_tokens,completion_tokens,tokens"
    assert lines[1:] == ["m1,2,0,11,6,17", "m2,1,1,3,0,3"]
    out = io.StringIO()
    call_command("usage_report", "--since=30d", "--by=day", stdout=out)
    table = out.getvalue().splitlines()
    assert table[0].startswith("Usage since") and table[1].split() == [
        "day",
        "calls",
        "errors",
        "prompt_tokens",
        "completion_tokens",
        "tokens",
    ]
    assert len(table) == 3 + 3  # title, header, rule, three days


@pytest.mark.parametrize("since", ["seven days", "7x", ""])
def test_usage_report_refuses_a_since_it_cannot_read(since):
    with pytest.raises(CommandError, match="--since"):
        call_command("usage_report", f"--since={since}", stdout=io.StringIO())


def test_the_dashboard_shows_each_keys_spend_against_its_budget(
    staff_client, client, runtime, make_key
):
    runtime.script = lambda prompt, body: REPLY
    _, plain = make_key(name="metered", token_budget=20, budget_period="month")
    make_key(name="unmetered")
    call(client, plain)
    page = staff_client.get("/admin/").content.decode()
    assert 'id="budgets"' in page
    row = page.split('id="budgets"')[1].split("</table>")[0]
    assert "metered" in row and "unmetered" not in row
    assert '<td class="num">5</td><td class="num">20</td><td class="num">25.0</td>' in row


def test_the_admin_sets_a_keys_budget_and_its_period(staff_client, superuser):
    from tests.test_admin import _add_key

    _add_key(staff_client, superuser, token_budget="1000", budget_period="day")
    key = ApiKey.objects.get(name="ci-runner")
    assert (key.token_budget, key.budget_period) == (1000, "day")
